package apibench

import (
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_APIBench: the benchmark measures the store (and qubiqd as a
// process), so it imports only store and value from the project.
func TestDeps_APIBench(t *testing.T) {
	for _, d := range deptest.Deps(t, deptest.Module+"/bench/api") {
		if (d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/")) && d != deptest.Module+"/store" &&
			d != deptest.Module+"/value" && d != deptest.Module+"/auth" {
			t.Errorf("bench/api must not import %s", d)
		}
	}
}
