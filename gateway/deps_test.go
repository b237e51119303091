package gateway

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The service layer's vocabulary imports auth, value and the standard
// library only, so every front door may import it without linking the tag
// engine, the store, the sandbox or a driver.
func TestDeps_Gateway(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/gateway", "qubiq.dev/edge/auth!", "qubiq.dev/edge/value!")
}
