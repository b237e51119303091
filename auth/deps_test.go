package auth

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

func TestDeps_Auth(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/auth", "qubiq.dev/edge/value")
}
