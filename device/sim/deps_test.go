package sim

import (
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Sim checks docs/architecture.md's layout table: a driver imports device and
// value only from the project, never another driver nor anything above
// device (non-test files).
func TestDeps_Sim(t *testing.T) {
	const pkg = deptest.Module + "/device/sim"
	allowed := map[string]bool{deptest.Module + "/device": true, deptest.Module + "/value": true}
	for _, d := range deptest.Deps(t, pkg) {
		if (d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/")) && !allowed[d] && !slices.Contains(deptest.Leaves, d) {
			t.Errorf("%s must not import %s (docs/architecture.md, Layout and dependency direction)", pkg, d)
		}
	}
}
