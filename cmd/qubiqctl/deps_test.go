package main

import (
	"os/exec"
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Qubiqctl checks that the CLI links client, api/apitypes, value
// and the standard library only: the CLI talks to the API only, and links
// no daemon code (docs/qubiqctl.md).
func TestDeps_Qubiqctl(t *testing.T) {
	const pkg = "qubiq.dev/edge/cmd/qubiqctl"
	deptest.OnlyProject(t, pkg, "qubiq.dev/edge/client!", "qubiq.dev/edge/api/apitypes!", "qubiq.dev/edge/value!", "qubiq.dev/edge/firmware/qfw!")
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d != pkg && !strings.HasPrefix(d, deptest.Module+"/") {
			t.Errorf("%s must not import %s (a module outside the project; stdlib only)", pkg, d)
		}
	}
}
