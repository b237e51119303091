package alarm

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// alarm must not import api, mqtt, flow, device or daemon (README, layout
// table); it reaches the tag engine through its own Source interface and
// imports only auth, value and store's types from the project.
func TestDeps_Alarm(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/alarm",
		"qubiq.dev/edge/api", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow", "qubiq.dev/edge/device", "qubiq.dev/edge/daemon")
	deptest.OnlyProject(t, "qubiq.dev/edge/alarm", "qubiq.dev/edge/auth!", "qubiq.dev/edge/value!", "qubiq.dev/edge/store!")
}
