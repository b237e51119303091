package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Modbusfloor: the floor speaks the protocol from
// its own code, so it measures nobody's driver; it imports no project
// package.
func TestDeps_Modbusfloor(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/cmd/modbusfloor")
}
