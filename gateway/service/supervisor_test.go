package service

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// TestGateway_SupervisorFront: what an MQTT front door does, through
// gateway.Gateway alone with a supervisor's grant: push numbered script
// versions (a replayed or older version refused), run an entry named
// "module.entry", roll back, write a tag, audit the command.
func TestGateway_SupervisorFront(t *testing.T) {
	s := simService(t)
	ctx := context.Background()
	var gw gateway.Gateway = s
	g := auth.Grant{Principal: "supervisor-a", Realm: auth.RealmSupervisor, Origin: "mqtt",
		Scopes: []auth.Scope{auth.TagRead, auth.TagWrite, auth.ScriptExecute}, WriteLevel: auth.LevelSupervise,
		Permissions: []auth.Permission{auth.Designer}}

	saved, err := gw.SaveScript(ctx, g, gateway.ScriptSource{Module: "pumps", Code: "def start(args):\n    return {'v': 1, 'args': args}\n", Version: 5})
	if err != nil || saved.Version != 5 || len(saved.Entries) != 1 || saved.Entries[0].Name != "start" {
		t.Fatalf("push v5: %+v %v", saved, err)
	}
	for _, v := range []int64{5, 3} {
		if _, err := gw.SaveScript(ctx, g, gateway.ScriptSource{Module: "pumps", Code: "def start(args):\n    return 0\n", Version: v}); !errors.Is(err, gateway.ErrConflict) || gateway.Kind(err) != "conflict" {
			t.Fatalf("push of v%d again: %v; want a conflict", v, err)
		}
	}
	if _, err := gw.SaveScript(ctx, g, gateway.ScriptSource{Module: "pumps", Code: "def start(args):\n    return {'v': 6}\n", Version: 6}); err != nil {
		t.Fatal(err)
	}
	module, entry, err := gateway.ParseEntry("pumps.start")
	if err != nil {
		t.Fatal(err)
	}
	run := func() string {
		t.Helper()
		r, err := gw.RunScript(ctx, g, module, entry, json.RawMessage(`[1]`))
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Result)
	}
	if got := run(); got != `{"v":6}` {
		t.Fatalf("run of v6 = %s", got)
	}
	back, err := gw.RollbackScript(ctx, g, "pumps")
	if err != nil || back.Version != 5 {
		t.Fatalf("rollback = %+v, %v; want version 5", back, err)
	}
	if got := run(); got != `{"v":1,"args":[1]}` {
		t.Fatalf("run after rollback = %s", got)
	}
	if _, err := gw.RollbackScript(ctx, g, "pumps"); !errors.Is(err, gateway.ErrConflict) {
		t.Fatalf("rollback past the first version: %v", err)
	}
	res, err := gw.WriteTags(ctx, g, []gateway.TagWrite{{Path: "Line1/Setpoint", Value: 42.5}, {Path: "Nope", Value: 1.0}})
	if err != nil || res[0].Quality != value.Good || res[1].Quality != value.BadNodeIDUnknown {
		t.Fatalf("write: %+v %v", res, err)
	}
	if err := gw.Audit(ctx, g, gateway.AuditEvent{Action: "mqtt.command", Target: "cmd/tags/write", Result: "ok",
		After: map[string]any{"id": "c-1"}}); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range auditRecords(t, s) {
		if r.Principal == "supervisor-a" {
			actions = append(actions, r.Action+" "+r.Target)
		}
	}
	want := []string{"script.save pumps", "script.save pumps", "script.run pumps.start", "script.rollback pumps",
		"script.run pumps.start", "tag.write Line1/Setpoint", "mqtt.command cmd/tags/write"}
	for _, w := range want {
		found := false
		for _, a := range actions {
			found = found || a == w
		}
		if !found {
			t.Errorf("no audit record %q among %v", w, actions)
		}
	}
}
