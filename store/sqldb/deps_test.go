package sqldb

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_SQLDB holds store's "must not import" column for store/sqldb
// (api, sandbox, mqtt, device), and more: it imports no project package
// but the standard-library-level helpers under internal/.
func TestDeps_SQLDB(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/store/sqldb",
		"qubiq.dev/edge/api", "qubiq.dev/edge/sandbox", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/device", "qubiq.dev/edge/tagengine")
	deptest.OnlyProject(t, "qubiq.dev/edge/store/sqldb", "qubiq.dev/edge/store/sqldb",
		"qubiq.dev/edge/internal/atomicfile", "qubiq.dev/edge/internal/yamlnode")
}
