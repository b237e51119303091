package service

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The service layer reaches the tag engine, the store and the sandbox, but
// never a front door, a concrete driver or the daemon (front doors →
// service layer → tag engine / store / sandbox → device → value).
func TestDeps_Service(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/gateway/service",
		"qubiq.dev/edge/api", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow", "qubiq.dev/edge/daemon",
		"qubiq.dev/edge/device/modbus", "qubiq.dev/edge/device/opcua", "qubiq.dev/edge/device/sim",
		"qubiq.dev/edge/device/all", "qubiq.dev/edge/opcuastore", "qubiq.dev/edge/client", "qubiq.dev/edge/cmd")
}
