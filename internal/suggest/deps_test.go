package suggest

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Suggest: the standard library only, so every package and the
// CLI may use it.
func TestDeps_Suggest(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/suggest")
}
