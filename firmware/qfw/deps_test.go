package qfw

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Qfw: the bundle format links the standard library only, so
// qubiqctl (firmware keygen|sign) and qubiq-slot can both use it.
func TestDeps_Qfw(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/firmware/qfw")
}
