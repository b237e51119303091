package rpc

import (
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// rpc is the transport only: nothing of the project (and, beyond it, the
// standard library only, so the Python mirror is all it must match).
func TestDeps_RPC_StdlibOnly(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/sandbox/rpc")
	for _, d := range deptest.Deps(t, "qubiq.dev/edge/sandbox/rpc") {
		if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
			t.Errorf("sandbox/rpc imports %s; it may import the standard library only", d)
		}
	}
}
