package value

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

func TestDeps_ValueImportsNothingOfTheProject(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/value")
}
