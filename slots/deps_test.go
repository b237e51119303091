package slots

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Slots: the slot agent stays small: store (schema version and
// file copies), with its own dependencies value and auth, and nothing else.
func TestDeps_Slots(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/slots", "qubiq.dev/edge/store!", "qubiq.dev/edge/value", "qubiq.dev/edge/auth", "qubiq.dev/edge/internal/atomicfile")
}
