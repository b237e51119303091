package all

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_All: the driver registry's imports link the drivers and nothing
// above them (docs/architecture.md, Layout and dependency direction).
func TestDeps_All(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/device/all", "qubiq.dev/edge/device", "qubiq.dev/edge/value",
		"qubiq.dev/edge/internal/atomicfile")
}
