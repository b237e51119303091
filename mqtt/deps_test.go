package mqtt

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_MQTT holds mqtt's "must not import" column: api, device,
// daemon, and the service layer's implementation (it reaches the appliance
// through the gateway interfaces only).
func TestDeps_MQTT(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/mqtt",
		"qubiq.dev/edge/api", "qubiq.dev/edge/device", "qubiq.dev/edge/daemon",
		"qubiq.dev/edge/gateway/service", "qubiq.dev/edge/store", "qubiq.dev/edge/sandbox",
		"qubiq.dev/edge/tagengine")
	deptest.OnlyProject(t, "qubiq.dev/edge/mqtt", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/gateway",
		"qubiq.dev/edge/auth", "qubiq.dev/edge/value", "qubiq.dev/edge/tagpath")
}
