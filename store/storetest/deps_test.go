package storetest

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// The store's test helper links the store and nothing above it.
func TestDeps_StoreTest(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/store/storetest",
		"qubiq.dev/edge/api", "qubiq.dev/edge/gateway", "qubiq.dev/edge/sandbox", "qubiq.dev/edge/daemon", "qubiq.dev/edge/device")
}
