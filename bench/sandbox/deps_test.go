package sandboxbench

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_SandboxBench: the benchmark measures the sandbox alone; it must
// not pull in the daemon, the API or the store.
func TestDeps_SandboxBench(t *testing.T) {
	deptest.Forbid(t, deptest.Module+"/bench/sandbox",
		deptest.Module+"/daemon", deptest.Module+"/api", deptest.Module+"/store", deptest.Module+"/tagengine")
}
