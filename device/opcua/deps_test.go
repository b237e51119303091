package opcua

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// device/opcua imports device and value only (docs/architecture.md, Layout and
// dependency direction: not the other drivers, nothing above device),
// plus the standard-library-only atomic file write.
func TestDeps_OPCUA(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/device/opcua", "qubiq.dev/edge/device!", "qubiq.dev/edge/value",
		"qubiq.dev/edge/internal/atomicfile")
}
