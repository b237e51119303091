package metrics

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Metrics: metrics is a front door like the API: it reads the
// service layer's vocabulary (gateway) only, never the tag engine, the
// store, the sandbox, a driver, the config or the daemon.
func TestDeps_Metrics(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/metrics", "qubiq.dev/edge/gateway!", "qubiq.dev/edge/auth!", "qubiq.dev/edge/value!")
}
