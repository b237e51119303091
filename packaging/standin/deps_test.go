package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Standin: the stand-in uses only the appliance libraries, the
// way qubiqd will once wired.
func TestDeps_Standin(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/packaging/standin", "qubiq.dev/edge/firmware", "qubiq.dev/edge/slots",
		"qubiq.dev/edge/store", "qubiq.dev/edge/systemd", "qubiq.dev/edge/value", "qubiq.dev/edge/auth", "qubiq.dev/edge/internal/atomicfile")
}
