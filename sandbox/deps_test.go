package sandbox

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// sandbox's "must not import" column of DESIGN.md's table (api, mqtt, store,
// device, tagengine), plus daemon, which only cmd/qubiqd imports.
func TestDeps_Sandbox_MustNotImport(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/sandbox",
		"qubiq.dev/edge/api", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/store",
		"qubiq.dev/edge/device", "qubiq.dev/edge/tagengine", "qubiq.dev/edge/daemon")
}
