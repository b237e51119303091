package docs

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Docs checks that package docs links no project package: it is
// the pages and their tests only (its tests drive the built binaries, and
// read tag CSV files through package config).
func TestDeps_Docs(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/docs")
}
