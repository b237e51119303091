package client

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Client checks that the client links api/apitypes and value only
// (docs/architecture.md, layout table), never the server or daemon code.
func TestDeps_Client(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/client", "qubiq.dev/edge/api/apitypes!", "qubiq.dev/edge/value")
}
