package codecheck

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Codecheck: the source checks read files only; they link no
// project package.
func TestDeps_Codecheck(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/codecheck", "qubiq.dev/edge/internal/codecheck")
}
