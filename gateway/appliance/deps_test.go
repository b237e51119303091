package appliance

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The appliance's operations sit in the service layer: they reach the
// slots, firmware, backup, store and systemd glue, never a front door, a
// concrete driver, the rest of the service layer or the daemon.
func TestDeps_Appliance(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/gateway/appliance",
		"qubiq.dev/edge/api", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow", "qubiq.dev/edge/daemon",
		"qubiq.dev/edge/device/modbus", "qubiq.dev/edge/device/opcua", "qubiq.dev/edge/device/sim",
		"qubiq.dev/edge/client", "qubiq.dev/edge/cmd", "qubiq.dev/edge/gateway/service")
}
