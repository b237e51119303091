package tagengine

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Tagengine holds tagengine's "must not import" column
// (docs/architecture.md, Layout and dependency direction): store, api,
// sandbox, mqtt and the concrete drivers; it sees devices only through the
// device interfaces.
func TestDeps_Tagengine(t *testing.T) {
	const pkg = "qubiq.dev/edge/tagengine"
	deptest.Forbid(t, pkg,
		"qubiq.dev/edge/store",
		"qubiq.dev/edge/api",
		"qubiq.dev/edge/sandbox",
		"qubiq.dev/edge/mqtt",
		"qubiq.dev/edge/device/modbus",
		"qubiq.dev/edge/device/opcua",
		"qubiq.dev/edge/device/sim",
		"qubiq.dev/edge/device/all",
	)
	deptest.OnlyProject(t, pkg, "qubiq.dev/edge/tagengine", "qubiq.dev/edge/device!", "qubiq.dev/edge/value",
		"qubiq.dev/edge/auth", "qubiq.dev/edge/tagpath")
}
