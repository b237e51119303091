package store

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Store holds store's "must not import" column (docs/architecture.md, Layout
// and dependency direction): api, sandbox, mqtt, device, tagengine.
func TestDeps_Store(t *testing.T) {
	for _, pkg := range []string{"qubiq.dev/edge/store", "qubiq.dev/edge/store/storetest"} {
		t.Run(pkg, func(t *testing.T) {
			deptest.Forbid(t, pkg,
				"qubiq.dev/edge/api",
				"qubiq.dev/edge/sandbox",
				"qubiq.dev/edge/mqtt",
				"qubiq.dev/edge/device",
				"qubiq.dev/edge/tagengine",
			)
			deptest.OnlyProject(t, pkg, "qubiq.dev/edge/store", "qubiq.dev/edge/value", "qubiq.dev/edge/auth")
		})
	}
}
