package service

import (
	"context"
	"errors"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// adminKey is the administrator key docs/security.md's first recipe made
// before it named every scope: users_admin and the rest, two scopes.
var adminKey = auth.Grant{Principal: "apikey:admin", Realm: auth.RealmAPIKey, Scopes: []auth.Scope{auth.TagRead, auth.TagWrite},
	WriteLevel: auth.LevelDesign, Permissions: []auth.Permission{auth.UsersAdmin, auth.Designer, auth.SandboxAdmin, auth.Firmware}}

// TestAddUser_RequestFaultsComeBeforeTheScopeRule: a duplicate name, an
// invalid or missing level and a short password are answered as what they
// are, even to a key that may not create the user; only a sound request
// is refused for the scopes, and the refusal names every scope the key
// lacks, the user's realm and level, and what a managing key needs.
func TestAddUser_RequestFaultsComeBeforeTheScopeRule(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	full := auth.Full("admin", auth.RealmPlatform, "rest")
	if err := s.AddUser(ctx, full, gateway.NewUser{Name: "vic", Realm: auth.RealmOperator, Level: auth.LevelOperate, Password: "vic-password"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		nu   gateway.NewUser
		kind error
		want string
	}{
		{"duplicate", gateway.NewUser{Name: "vic", Realm: auth.RealmOperator, Level: auth.LevelOperate, Password: "long-enough"},
			gateway.ErrConflict, `user "vic" already exists`},
		{"missing level", gateway.NewUser{Name: "op1", Realm: auth.RealmOperator, Password: "long-enough"},
			gateway.ErrInvalid, `user "op1": missing level`},
		{"level of the wrong realm", gateway.NewUser{Name: "op1", Realm: auth.RealmOperator, Level: auth.LevelDesign, Password: "long-enough"},
			gateway.ErrInvalid, `not "design"`},
		{"platform with a level", gateway.NewUser{Name: "eng", Realm: auth.RealmPlatform, Level: auth.LevelOperate, Password: "long-enough"},
			gateway.ErrInvalid, "platform users hold permissions, not a level"},
		{"short password", gateway.NewUser{Name: "op1", Realm: auth.RealmOperator, Level: auth.LevelOperate, Password: "short"},
			gateway.ErrInvalid, `user "op1": password shorter than 8 characters`},
	}
	for _, c := range cases {
		err := s.AddUser(ctx, adminKey, c.nu)
		if !errors.Is(err, c.kind) || gateway.Message(err) != err.Error() || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v; want %v naming %q", c.name, err, c.kind, c.want)
		}
	}

	err := s.AddUser(ctx, adminKey, gateway.NewUser{Name: "op1", Realm: auth.RealmOperator, Level: auth.LevelOperate, Password: "long-enough"})
	var de *auth.DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("a sound request from a narrow key: %v; want a refusal", err)
	}
	msg := err.Error()
	for _, want := range []string{`user "op1" (an operator at level operate)`, `"alarm:read", "alarm:ack", "db:read"`, `"file:write"`,
		"scopes tag:read,tag:write,alarm:read,alarm:ack,db:read,db:write,hist:read,hist:write,vars:read,vars:write,file:read,file:write, write level operate",
		`docs/security.md, "Who may manage a user"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q\ndoes not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "a operator") || strings.Contains(msg, `"tag:read"`) {
		t.Errorf("refusal %q: bad grammar or names a scope the key holds", msg)
	}

	// The key the docs' recipe now makes manages operators at every level.
	key := auth.Grant{Principal: "apikey:users", Realm: auth.RealmAPIKey, Scopes: auth.AllScopes, WriteLevel: auth.LevelSupervise,
		Permissions: []auth.Permission{auth.UsersAdmin}}
	for _, l := range []auth.Level{auth.LevelView, auth.LevelOperate, auth.LevelSupervise} {
		name := "op-" + l.String()
		if err := s.AddUser(ctx, key, gateway.NewUser{Name: name, Realm: auth.RealmOperator, Level: l, Password: "long-enough"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSetPassword_AnUnknownUserFirstThenTheScopeRule: setting a password
// is taking over the account (whoever sets it can log in as the user), so
// it is refused, as creating the user would be, to a key its sessions
// would widen; an unknown user answers not found in the request's words
// and no store's.
func TestSetPassword_AnUnknownUserFirstThenTheScopeRule(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	full := auth.Full("admin", auth.RealmPlatform, "rest")
	if err := s.AddUser(ctx, full, gateway.NewUser{Name: "vic", Realm: auth.RealmOperator, Level: auth.LevelView, Password: "vic-password"}); err != nil {
		t.Fatal(err)
	}
	err := s.SetPassword(ctx, adminKey, "nobody", "long-enough")
	if !errors.Is(err, gateway.ErrNotFound) || err.Error() != `user "nobody": not found` {
		t.Errorf("unknown user: %v", err)
	}
	if err := s.SetPassword(ctx, full, "vic", "short"); !errors.Is(err, gateway.ErrInvalid) || err.Error() != `user "vic": password shorter than 8 characters` {
		t.Errorf("short password: %v", err)
	}
	var de *auth.DeniedError
	if err := s.SetPassword(ctx, adminKey, "vic", "long-enough"); !errors.As(err, &de) || !strings.Contains(err.Error(), `"alarm:read"`) {
		t.Errorf("a key that lacks the user's read scopes set its password: %v", err)
	}
	reads := auth.Grant{Principal: "apikey:r", Realm: auth.RealmAPIKey, Scopes: auth.ReadScopes, Permissions: []auth.Permission{auth.UsersAdmin}}
	if err := s.SetPassword(ctx, reads, "vic", "long-enough"); err != nil {
		t.Errorf("a key covering a view operator: %v", err)
	}
}

// TestRevokeAPIKeyAndDisableUser_SayWhenAlreadyDone: revoking a revoked
// key and disabling a disabled user succeed (idempotent) and report that
// nothing changed, audited once; unknown ones are not found.
func TestRevokeAPIKeyAndDisableUser_SayWhenAlreadyDone(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	full := auth.Full("admin", auth.RealmPlatform, "rest")
	key, err := s.CreateAPIKey(ctx, full, gateway.NewAPIKey{Name: "k", Scopes: []auth.Scope{auth.TagRead}, WriteLevel: auth.LevelView})
	if err != nil {
		t.Fatal(err)
	}
	if already, err := s.RevokeAPIKey(ctx, full, key.ID); already || err != nil {
		t.Fatalf("revoke: already %v, %v", already, err)
	}
	if already, err := s.RevokeAPIKey(ctx, full, key.ID); !already || err != nil {
		t.Errorf("revoke again: already %v, %v; want already", already, err)
	}
	if _, err := s.RevokeAPIKey(ctx, full, "ffffffffffffffff"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("revoke an unknown key: %v", err)
	}
	if err := s.AddUser(ctx, full, gateway.NewUser{Name: "vic", Realm: auth.RealmOperator, Level: auth.LevelView, Password: "vic-password"}); err != nil {
		t.Fatal(err)
	}
	if already, err := s.DisableUser(ctx, full, "vic"); already || err != nil {
		t.Fatalf("disable: already %v, %v", already, err)
	}
	if already, err := s.DisableUser(ctx, full, "vic"); !already || err != nil {
		t.Errorf("disable again: already %v, %v; want already", already, err)
	}
	n := map[string]int{}
	for _, r := range auditRecords(t, s) {
		n[r.Action]++
	}
	if n["apikey.revoke"] != 1 || n["user.disable"] != 1 {
		t.Errorf("audited %v; want one revoke and one disable", n)
	}
}
