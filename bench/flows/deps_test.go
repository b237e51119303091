package flowsbench

import (
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_FlowsBench: the benchmark drives the built qubiqd and Node-RED
// from outside, through their wire protocols; of the project it imports
// only the peers' helpers.
func TestDeps_FlowsBench(t *testing.T) {
	for _, d := range deptest.Deps(t, deptest.Module+"/bench/flows") {
		if (d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/")) && d != deptest.Module+"/internal/peers" {
			t.Errorf("bench/flows must not import %s: it measures the binaries from outside", d)
		}
	}
}
