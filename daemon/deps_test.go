package daemon

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// daemon is wiring only: it imports the parts it builds, and nothing but
// cmd/qubiqd imports it (checked from the other side by every package's
// own deps test, which forbids daemon). It must not import the CLI's
// packages.
func TestDeps_Daemon(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/daemon", "qubiq.dev/edge/client", "qubiq.dev/edge/cmd")
}
