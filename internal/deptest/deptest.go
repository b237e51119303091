// Package deptest checks the dependency direction of docs/architecture.md's layout table
// from tests: each package's deps_test.go names the project packages it must
// not import, and deptest fails the test when any of them is among the
// package's transitive dependencies (non-test files only). Imported by tests
// only.
package deptest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is the project's module path.
const Module = "qubiq.dev/edge"

// Deps returns the transitive dependencies of pkg (an import path), as
// reported by `go list -deps`, excluding pkg itself.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var deps []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && l != pkg {
			deps = append(deps, l)
		}
	}
	return deps
}

// Forbid fails t when pkg depends, directly or not, on any of the forbidden
// packages. A forbidden entry "qubiq.dev/edge/api" also forbids its
// sub-packages ("qubiq.dev/edge/api/apitypes"); end it with "!" to forbid
// only the package itself.
func Forbid(t testing.TB, pkg string, forbidden ...string) {
	t.Helper()
	for _, d := range Deps(t, pkg) {
		for _, f := range forbidden {
			exact := strings.HasSuffix(f, "!")
			f = strings.TrimSuffix(f, "!")
			if d == f || (!exact && strings.HasPrefix(d, f+"/")) {
				t.Errorf("%s must not import %s (docs/architecture.md, Layout and dependency direction)", pkg, d)
			}
		}
	}
}

// Leaves are the project packages every package may import, the CLI
// included: they import the standard library only (each one's own deps
// test holds that) and hold no rule of a layer (docs/architecture.md).
var Leaves = []string{Module + "/internal/suggest"}

// OnlyProject fails t when pkg depends on a project package other than the
// allowed ones (import paths, each also allowing its sub-packages unless it
// ends with "!") and the Leaves.
func OnlyProject(t testing.TB, pkg string, allowed ...string) {
	t.Helper()
	for _, d := range Deps(t, pkg) {
		if d != Module && !strings.HasPrefix(d, Module+"/") || slices.Contains(Leaves, d) {
			continue
		}
		ok := false
		for _, a := range allowed {
			exact := strings.HasSuffix(a, "!")
			a = strings.TrimSuffix(a, "!")
			if d == a || (!exact && strings.HasPrefix(d, a+"/")) {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("%s must not import %s (docs/architecture.md, Layout and dependency direction)", pkg, d)
		}
	}
}
