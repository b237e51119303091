package modbusbench

import (
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_ModbusBench: the scanner measures the modbus driver alone, so
// it imports only the driver and what it imports from the project (device,
// value); the benchmark adds the harness that runs qubiqd from outside.
func TestDeps_ModbusBench(t *testing.T) {
	allowed := map[string]bool{deptest.Module + "/device": true, deptest.Module + "/device/modbus": true,
		deptest.Module + "/value": true, deptest.Module + "/bench/harness": true}
	for _, pkg := range []string{deptest.Module + "/bench/modbus", deptest.Module + "/bench/modbus/cmd/scanner"} {
		for _, d := range deptest.Deps(t, pkg) {
			if (d == deptest.Module || strings.HasPrefix(d, deptest.Module+"/")) && !allowed[d] && !slices.Contains(deptest.Leaves, d) {
				t.Errorf("%s must not import %s: the benchmark measures the driver alone", pkg, d)
			}
		}
	}
}
