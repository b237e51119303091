package main

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_QubiqSlot: the slot agent stays small and outside the daemon:
// slots, firmware, systemd (the drop-in) and store's schema reading only.
func TestDeps_QubiqSlot(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/cmd/qubiq-slot", "qubiq.dev/edge/slots", "qubiq.dev/edge/firmware",
		"qubiq.dev/edge/systemd", "qubiq.dev/edge/store!", "qubiq.dev/edge/value", "qubiq.dev/edge/auth", "qubiq.dev/edge/internal/atomicfile")
}
