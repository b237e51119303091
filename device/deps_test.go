package device

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

func TestDeps_Device(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/device", "qubiq.dev/edge/value")
}
