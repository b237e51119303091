package harness

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Harness: the harness measures qubiqd from outside, as a user
// runs it (its binary, its config, /proc); it links none of the daemon's
// packages.
func TestDeps_Harness(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/harness")
}
