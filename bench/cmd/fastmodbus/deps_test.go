package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Fastmodbus: the benchmarks' server speaks the protocol from
// its own code, so it measures nobody's driver; it imports no project
// package.
func TestDeps_Fastmodbus(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/bench/cmd/fastmodbus")
}
