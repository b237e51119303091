package console

import (
	"testing"

	"qubiq.dev/edge/internal/deptest"
)

// TestDeps_Console: the console's assets link no project package at all
// (it is part of api, whose "must not import" column it keeps by importing
// nothing: every action is a REST call of the browser).
func TestDeps_Console(t *testing.T) {
	deptest.OnlyProject(t, "qubiq.dev/edge/api/console")
}
