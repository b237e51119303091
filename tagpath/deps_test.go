package tagpath

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Tagpath: tagpath imports nothing of the project, so that api,
// tagengine, config and mqtt may all import it.
func TestDeps_Tagpath(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/tagpath")
}

// TestDeps_TagpathThirdParty: besides the standard library, only
// golang.org/x/text's normalisation.
func TestDeps_TagpathThirdParty(t *testing.T) {
	for _, d := range deptest.Deps(t, "qubiq.dev/edge/tagpath") {
		if !isStd(d) && d != "golang.org/x/text/unicode/norm" && d != "golang.org/x/text/transform" {
			t.Errorf("tagpath must import only the standard library and golang.org/x/text/unicode/norm, not %s", d)
		}
	}
}

func isStd(p string) bool {
	for i := 0; i < len(p) && p[i] != '/'; i++ {
		if p[i] == '.' {
			return false
		}
	}
	return true
}
