package systemd

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

func TestDeps_SystemdImportsNothingOfTheProject(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/systemd")
}
