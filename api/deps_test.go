package api

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_API: api is a front door: it reaches the appliance through the
// service layer's vocabulary (gateway) only, so it links neither the
// service layer's implementation, the tag engine, the store, the sandbox,
// a driver nor the config (front doors → service layer → tag engine /
// store / sandbox → device → value); nor the other front doors, the
// daemon or the CLI.
func TestDeps_API(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/api",
		"qubiq.dev/edge/device", "qubiq.dev/edge/sandbox", "qubiq.dev/edge/store",
		"qubiq.dev/edge/tagengine", "qubiq.dev/edge/gateway/service", "qubiq.dev/edge/opcuastore",
		"qubiq.dev/edge/config", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow",
		"qubiq.dev/edge/daemon", "qubiq.dev/edge/client", "qubiq.dev/edge/cmd")
}
