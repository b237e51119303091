package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Scanner: the driver-only scanner links the Modbus driver and
// nothing of the daemon above it, so its figures are the driver's alone.
func TestDeps_Scanner(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/modbus/cmd/scanner", "qubiq.dev/edge/bench/modbus/cmd/scanner",
		"qubiq.dev/edge/device", "qubiq.dev/edge/value", "qubiq.dev/edge/internal/atomicfile")
}
