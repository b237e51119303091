package mqttstore

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_MQTTStore: an adapter between parts, never a front door.
func TestDeps_MQTTStore(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/mqttstore", "qubiq.dev/edge/api", "qubiq.dev/edge/device", "qubiq.dev/edge/daemon")
}
