package devicetest

import (
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Devicetest checks that the shared driver test kit depends on
// device and value only, so that any driver's tests may import it without a
// cycle.
func TestDeps_Devicetest(t *testing.T) {
	const pkg = deptest.Module + "/device/devicetest"
	allowed := map[string]bool{deptest.Module + "/device": true, deptest.Module + "/value": true}
	for _, d := range deptest.Deps(t, pkg) {
		if (d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/")) && !allowed[d] && !slices.Contains(deptest.Leaves, d) {
			t.Errorf("%s must not import %s", pkg, d)
		}
	}
}
