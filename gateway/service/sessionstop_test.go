package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// TestRunScript_PanelScriptStopsWhenItsSessionEnds: a script started with
// the grant of a LiveView session stops at its next system.* call once
// the session is logged out (PermissionDenied, the run's kind
// permission_denied), instead of running on to its timeout; as a script
// of a revoked API key does.
func TestRunScript_PanelScriptStopsWhenItsSessionEnds(t *testing.T) {
	s := simService(t)
	ctx := context.Background()
	admin := auth.Full("admin", auth.RealmPlatform, "rest")
	if err := s.AddUser(ctx, admin, gateway.NewUser{Name: "op1", Realm: auth.RealmOperator, Level: auth.LevelOperate, Password: "op1-password"}); err != nil {
		t.Fatal(err)
	}
	// The loop runs until its 20 s timeout unless a system.* call stops it;
	// vars.set tells the test it runs.
	code := "@gateway(timeout_ms=20000)\ndef loop(args):\n    system.vars.set('started', 1)\n    while True:\n        system.tag.read(['Line1/Setpoint'])\n"
	if _, err := s.SaveScript(ctx, admin, gateway.ScriptSource{Module: "panel", Code: code}); err != nil {
		t.Fatal(err)
	}
	tok, info, err := s.Login(ctx, "op1", "op1-password", "10.0.0.20")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := auth.LiveViewGrant(info.Session("pump1"), false)
	done := make(chan error, 1)
	go func() {
		_, err := s.RunScript(ctx, g, "panel", "loop", json.RawMessage(`{}`))
		done <- err
	}()
	for {
		if _, err := s.GetVar(ctx, admin, "started"); err == nil {
			break
		} else if !errors.Is(err, gateway.ErrNotFound) {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended before the logout: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := s.Logout(ctx, tok); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if gateway.Kind(err) != gateway.KindPermissionDenied || !strings.Contains(err.Error(), "session") {
		t.Fatalf("run after logout: %v (kind %q), want permission_denied naming the ended session", err, gateway.Kind(err))
	}
}
