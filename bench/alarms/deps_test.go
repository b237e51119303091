package alarmbench

import (
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_AlarmBench: the benchmark drives qubiqd as a process, through
// its config, REST and WebSocket only; it imports no project package.
func TestDeps_AlarmBench(t *testing.T) {
	for _, d := range deptest.Deps(t, deptest.Module+"/bench/alarms") {
		if d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/") {
			t.Errorf("bench/alarms must not import %s", d)
		}
	}
}
