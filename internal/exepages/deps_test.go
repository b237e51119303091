package exepages

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// exepages reads /proc and calls madvise: the standard library and
// golang.org/x/sys/unix, no package of the project.
func TestDeps_Exepages(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/exepages")
}
