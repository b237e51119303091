package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// TestRunScript_UnknownModuleIsNotFoundAsRollbackIs: a run of a module the
// store lacks is not_found (404 on REST) naming the module, the same kind
// and words as a rollback of it (docs/scripting.md, "args and the result").
func TestRunScript_UnknownModuleIsNotFoundAsRollbackIs(t *testing.T) {
	s := simService(t)
	ctx := context.Background()
	full := auth.Full("admin", auth.RealmPlatform, "rest")
	_, runErr := s.RunScript(ctx, full, "nomod", "f", json.RawMessage(`{}`))
	_, rbErr := s.RollbackScript(ctx, full, "nomod")
	for name, err := range map[string]error{"run": runErr, "rollback": rbErr} {
		if k := gateway.Kind(err); k != gateway.KindNotFound {
			t.Errorf("%s of an unknown module: kind %q (%v), want %q", name, k, err, gateway.KindNotFound)
		}
		if err == nil || !strings.Contains(gateway.Message(err), `unknown module "nomod"`) {
			t.Errorf("%s of an unknown module: %v, want it to name the module", name, err)
		}
	}
}
