package api

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_API checks DESIGN.md's "must not import" column for api (and the
// task's: device, sandbox, store, tagengine), plus the packages above it.
func TestDeps_API(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/api",
		"qubiq.dev/edge/device", "qubiq.dev/edge/sandbox", "qubiq.dev/edge/store",
		"qubiq.dev/edge/tagengine", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/flow",
		"qubiq.dev/edge/daemon", "qubiq.dev/edge/client", "qubiq.dev/edge/cmd")
}
