package mqttbench

import (
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_MQTTBench: the benchmark drives qubiqd as a process, through
// its config, REST health and the broker only; it imports no project
// package.
func TestDeps_MQTTBench(t *testing.T) {
	for _, d := range deptest.Deps(t, deptest.Module+"/bench/mqtt") {
		if d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/") {
			t.Errorf("bench/mqtt must not import %s", d)
		}
	}
}
