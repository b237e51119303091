package sandbox

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// sandbox sits below the service layer: it must not import the front doors
// (api, mqtt), the service layer (gateway and its implementation, which
// reaches it through the Services it defines), the store, the tag engine,
// a device, or the daemon.
func TestDeps_Sandbox_MustNotImport(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/sandbox",
		"qubiq.dev/edge/api", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow", "qubiq.dev/edge/store",
		"qubiq.dev/edge/device", "qubiq.dev/edge/tagengine", "qubiq.dev/edge/gateway", "qubiq.dev/edge/daemon")
}
