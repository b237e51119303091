package footprintbench

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_FootprintBench: the benchmark measures qubiqd from outside (its
// binary, /proc, the store file after it stopped), through the harness.
func TestDeps_FootprintBench(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/footprint", "qubiq.dev/edge/bench/harness")
}
