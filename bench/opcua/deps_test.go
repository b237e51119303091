package opcuabench

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_BenchOPCUA: the benchmark drives the OPC UA driver and the
// built daemon from outside; it links the driver and value only.
func TestDeps_BenchOPCUA(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/opcua", "qubiq.dev/edge/bench/opcua", "qubiq.dev/edge/device",
		"qubiq.dev/edge/value", "qubiq.dev/edge/internal/atomicfile")
}
