package devicesbench

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_DevicesBench: the benchmark measures qubiqd and Node-RED from
// outside, through the harness.
func TestDeps_DevicesBench(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/devices", "qubiq.dev/edge/bench/harness")
}
