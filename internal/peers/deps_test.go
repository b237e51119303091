package peers

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The peer launchers are test helpers of every layer: they import no
// project package, so any package's tests may use them.
func TestDeps_Peers(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/peers")
}
