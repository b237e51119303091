package files

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Files: files imports no project package (it is the daemon's
// system.files backend).
func TestDeps_Files(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/files", "qubiq.dev/edge/files")
}
