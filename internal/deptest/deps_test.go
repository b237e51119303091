package deptest

import "testing"

// TestDeps_Deptest: the dependency checker itself links no project
// package (it runs `go list`).
func TestDeps_Deptest(t *testing.T) {
	OnlyProject(t, Module+"/internal/deptest", Module+"/internal/deptest")
}
