package cgroup

import (
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// cgroup imports nothing of the project, and beyond the standard library
// only golang.org/x/sys.
func TestDeps_Cgroup_StdlibAndXSysOnly(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/sandbox/cgroup")
	for _, d := range deptest.Deps(t, "qubiq.dev/edge/sandbox/cgroup") {
		first, _, _ := strings.Cut(d, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(d, "golang.org/x/sys/") {
			t.Errorf("sandbox/cgroup imports %s", d)
		}
	}
}
