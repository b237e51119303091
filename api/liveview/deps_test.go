package liveview

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_LiveView checks that the panel package links api/apitypes,
// auth and value only (it is part of api: docs/architecture.md's "must not import"
// column for api applies).
func TestDeps_LiveView(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/api/liveview", "qubiq.dev/edge/api/apitypes", "qubiq.dev/edge/auth", "qubiq.dev/edge/value",
		"qubiq.dev/edge/internal/yamlnode")
}
