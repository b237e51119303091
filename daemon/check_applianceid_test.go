package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck_MQTTRefusesTheApplianceIDTheStartRefuses: --check-config
// "exits 0 with configuration ok" only for a config the start takes
// (docs/config.md); an appliance_id mqtt.New refuses (a '/', a tab: one
// level of every topic) fails the check as it fails the start.
func TestCheck_MQTTRefusesTheApplianceIDTheStartRefuses(t *testing.T) {
	for _, id := range []string{"line1/edge-01", "line1\tedge-01", "edge+1"} {
		dir := t.TempDir()
		cfg := "appliance_id: \"" + strings.ReplaceAll(id, "\t", `\t`) + "\"\ndata_dir: data\nmqtt:\n  brokers: [tcp://127.0.0.1:1]\n"
		if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Check(filepath.Join(dir, "qubiq.yaml"), quiet); err == nil || !strings.Contains(err.Error(), "appliance_id") {
			t.Errorf("appliance_id %q: check = %v, want it refused (the start refuses it)", id, err)
		}
	}
}
