package opcuastore

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// opcuastore sits beside the service layer, below the front doors: the
// daemon wires it into gateway/service, which never imports it.
func TestDeps_OPCUAStore(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/opcuastore",
		"qubiq.dev/edge/api", "qubiq.dev/edge/gateway/service", "qubiq.dev/edge/sandbox", "qubiq.dev/edge/daemon",
		"qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow", "qubiq.dev/edge/device/modbus", "qubiq.dev/edge/device/sim")
}
