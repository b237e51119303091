package atomicfile

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// atomicfile is a leaf: the standard library only, so every layer (drivers
// included) may use it.
func TestDeps_AtomicFile(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/atomicfile")
}
