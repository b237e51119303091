package enginebench

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_EngineBench: the benchmark runs the engine's own testing.B
// benchmark as a process (go test) and Node-RED, through the harness.
func TestDeps_EngineBench(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/engine", "qubiq.dev/edge/bench/harness")
}
