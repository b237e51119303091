package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// TestRunScript_AuditResultIsTheOutcome: a run answered script_error,
// permission_denied or timeout is recorded with that result at the top
// of its audit record, a run that returned with "ok".
func TestRunScript_AuditResultIsTheOutcome(t *testing.T) {
	s := simService(t)
	ctx := context.Background()
	des := auth.Grant{Principal: "des", Realm: auth.RealmPlatform, Origin: "rest",
		Scopes: []auth.Scope{auth.TagRead, auth.ScriptExecute}, WriteLevel: auth.LevelDesign, Permissions: []auth.Permission{auth.Designer}}
	code := "def ok(args):\n    return 1\n\n" +
		"def boom(args):\n    raise ValueError('no')\n\n" +
		"def write(args):\n    return system.tag.write(['Line1/Setpoint'], [1])\n\n" +
		"@gateway(timeout_ms=200)\ndef slow(args):\n    while True:\n        pass\n"
	if _, err := s.SaveScript(ctx, des, gateway.ScriptSource{Module: "m", Code: code}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ entry, want string }{
		{"ok", "ok"}, {"boom", "script_error"}, {"write", "permission_denied"}, {"slow", "timeout"},
	} {
		_, err := s.RunScript(ctx, des, "m", tt.entry, json.RawMessage(`{}`))
		if got := gateway.Kind(err); tt.want != "ok" && got != tt.want {
			t.Fatalf("run m.%s: kind %q (%v), want %q", tt.entry, got, err, tt.want)
		}
	}
	got := map[string]string{}
	for _, r := range auditRecords(t, s) {
		if r.Action == "script.run" {
			got[r.Target] = r.Result
		}
	}
	for entry, want := range map[string]string{"m.ok": "ok", "m.boom": "script_error", "m.write": "permission_denied", "m.slow": "timeout"} {
		if got[entry] != want {
			t.Errorf("audit record of %s: result %q, want %q (all: %v)", entry, got[entry], want, got)
		}
	}
	// The audit filtered by result: only the failed run of m.boom.
	recs, err := s.AuditRecords(ctx, 0, 100, gateway.AuditQuery{Result: "script_error"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Action != "script.run" || recs[0].Target != "m.boom" || recs[0].Result != "script_error" ||
		!strings.Contains(recs[0].Detail, "ValueError") {
		t.Fatalf("records with result script_error = %+v, want the one run of m.boom", recs)
	}
	all, err := s.AuditRecords(ctx, 0, 100, gateway.AuditQuery{})
	if err != nil || len(all) <= len(recs) {
		t.Fatalf("unfiltered: %d records (%v), want more than the filtered %d", len(all), err, len(recs))
	}
}
