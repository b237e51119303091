package yamlnode

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// yamlnode is a leaf: no project package, so config, api/liveview and
// store/sqldb may all use it.
func TestDeps_YAMLNode(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/internal/yamlnode")
}
