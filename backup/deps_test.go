package backup

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Backup: store and its sqldb (with their internal helpers), the
// firmware key format, nothing of the front doors or the daemon.
func TestDeps_Backup(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/backup", "qubiq.dev/edge/api", "qubiq.dev/edge/daemon", "qubiq.dev/edge/sandbox",
		"qubiq.dev/edge/device", "qubiq.dev/edge/tagengine", "qubiq.dev/edge/mqtt")
	deptest.OnlyProject(t, "qubiq.dev/edge/backup", "qubiq.dev/edge/store", "qubiq.dev/edge/firmware", "qubiq.dev/edge/slots",
		"qubiq.dev/edge/value", "qubiq.dev/edge/auth", "qubiq.dev/edge/internal")
}
