package config

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_ConfigBelowTheParts: config parses the files every part reads;
// it sits below them (it reaches the tag engine and device for the tag
// conversion) and imports no part that reads it: not the front doors, not
// the service layer, not the store, the sandbox, a driver or the daemon.
func TestDeps_ConfigBelowTheParts(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/config",
		"qubiq.dev/edge/api", "qubiq.dev/edge/gateway", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow",
		"qubiq.dev/edge/store", "qubiq.dev/edge/sandbox", "qubiq.dev/edge/daemon", "qubiq.dev/edge/opcuastore",
		"qubiq.dev/edge/device/modbus", "qubiq.dev/edge/device/opcua", "qubiq.dev/edge/device/sim")
}
