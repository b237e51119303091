package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/config"
)

func loadConfig(t *testing.T, text string) *config.Daemon {
	t.Helper()
	f := filepath.Join(t.TempDir(), "qubiq.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.LoadDaemon(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A block no part acts on is a warning naming it and its line; a block a
// part of the same name runs is not; a worker limit at unlimited is
// warned by the python section's predicate.
func TestConfigWarnings(t *testing.T) {
	c := loadConfig(t, `appliance_id: a
data_dir: data
python:
  memory_max: unlimited
  cpu_max: unlimited
mqtt:
  brokers: [tcp://127.0.0.1:1883]
store: {open_timeout: 2s}
`)
	parts := []string{"store", "service", "flows", "metrics", "api"}
	got := configWarnings(c, parts)
	want := []string{
		"python.memory_max: unlimited: script workers run without that limit",
		"python.cpu_max: unlimited: script workers run without that limit",
		c.File + ":6: mqtt: this qubiqd does not act on this block; it is ignored",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A part named after the section acts on it: no warning.
	if got := configWarnings(c, append(parts, "mqtt")); slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "mqtt") }) {
		t.Errorf("with an mqtt part: %q, want no mqtt warning", got)
	}
	// Nothing written, nothing warned.
	if got := configWarnings(loadConfig(t, "appliance_id: a\n"), parts); len(got) != 0 {
		t.Errorf("plain config: %q, want no warning", got)
	}
}
