package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Packaging: the build tool takes the bundle format (firmware,
// slots) and the store's schema version, nothing of the daemon.
func TestDeps_Packaging(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/packaging", "qubiq.dev/edge/firmware", "qubiq.dev/edge/slots",
		"qubiq.dev/edge/store!", "qubiq.dev/edge/value", "qubiq.dev/edge/auth", "qubiq.dev/edge/internal/atomicfile")
}
