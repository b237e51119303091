package packages

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The package manager imports no project package: the sandbox and the
// service layer use it, never the reverse.
func TestDeps_Packages(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/sandbox/packages")
}
