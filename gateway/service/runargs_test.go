package service

import (
	"context"
	"encoding/json"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// TestRunScript_AbsentArgsAreAnEmptyObject: a run without args (nil or
// empty, as a REST request, an MQTT command or a panel button without
// args sends it) reaches the entry as {}; an explicit null as None; a
// value as itself.
func TestRunScript_AbsentArgsAreAnEmptyObject(t *testing.T) {
	s := simService(t)
	ctx := context.Background()
	des := auth.Grant{Principal: "des", Realm: auth.RealmPlatform, Origin: "rest",
		Scopes: []auth.Scope{auth.ScriptExecute}, WriteLevel: auth.LevelDesign, Permissions: []auth.Permission{auth.Designer}}
	if _, err := s.SaveScript(ctx, des, gateway.ScriptSource{Module: "m", Code: "def echo(args):\n    return repr(args)\n"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args json.RawMessage
		want string
	}{
		{nil, `"{}"`}, {json.RawMessage(""), `"{}"`}, {json.RawMessage("null"), `"None"`}, {json.RawMessage(`{"a":1}`), `"{'a': 1}"`},
	} {
		run, err := s.RunScript(ctx, des, "m", "echo", tt.args)
		if err != nil {
			t.Fatalf("args %q: %v", tt.args, err)
		}
		if string(run.Result) != tt.want {
			t.Errorf("args %q reached the entry as %s, want %s", tt.args, run.Result, tt.want)
		}
	}
}
