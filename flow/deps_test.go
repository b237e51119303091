package flow

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Flow holds flow's "must not import" column (docs/flows.md:
// a front door on the service layer): api, device, daemon, and the
// service layer's implementation; of the project it uses gateway, auth,
// value and tagpath (the one rule for tag paths) only.
func TestDeps_Flow(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/flow",
		"qubiq.dev/edge/api",
		"qubiq.dev/edge/device",
		"qubiq.dev/edge/daemon",
		"qubiq.dev/edge/gateway/service",
		"qubiq.dev/edge/store",
		"qubiq.dev/edge/sandbox",
		"qubiq.dev/edge/tagengine",
		"qubiq.dev/edge/mqtt",
	)
	deptest.OnlyProject(t, "qubiq.dev/edge/flow", "qubiq.dev/edge/gateway!", "qubiq.dev/edge/auth", "qubiq.dev/edge/value",
		"qubiq.dev/edge/tagpath")
}
