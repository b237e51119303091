package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// qubiqd is flags, signals and run: it reaches its parts through daemon
// and never links the technician CLI's packages.
func TestDeps_Qubiqd(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/cmd/qubiqd", "qubiq.dev/edge/client", "qubiq.dev/edge/cmd/qubiqctl")
}
