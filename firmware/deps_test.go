package firmware

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Firmware: the bundle code runs inside qubiq-slot too, so it stays
// small: slots (and what slots needs), nothing else of the project.
func TestDeps_Firmware(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/firmware", "qubiq.dev/edge/firmware/qfw", "qubiq.dev/edge/slots", "qubiq.dev/edge/store!", "qubiq.dev/edge/value", "qubiq.dev/edge/auth", "qubiq.dev/edge/internal/atomicfile")
}
