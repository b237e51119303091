package apitypes

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_APITypes checks that the wire structs import the standard
// library and value only (docs/architecture.md, layout table), so the CLI stays small.
func TestDeps_APITypes(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/api/apitypes", "qubiq.dev/edge/value")
}
