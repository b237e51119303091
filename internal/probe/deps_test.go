package probe

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The probe sees changes through the service layer's vocabulary only.
func TestDeps_Probe(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/probe", "qubiq.dev/edge/gateway!", "qubiq.dev/edge/auth!",
		"qubiq.dev/edge/value!")
}
