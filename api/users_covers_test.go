package api

import (
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
)

// TestCovers_UsersAdminCannotMintWiderUsers: a users_admin key holding only
// reads may create view operators, not operate/supervise operators nor
// platform users, whose sessions would hold more than the key (attack
// report: POST /users made a platform user from a read-only key).
func TestCovers_UsersAdminCannotMintWiderUsers(t *testing.T) {
	admin := auth.Grant{Principal: "apikey:admin", Scopes: auth.ReadScopes, WriteLevel: auth.LevelView,
		Permissions: []auth.Permission{auth.UsersAdmin}}
	cases := []struct {
		realm, level string
		perms        []string
		refused      string
	}{
		{"operator", "view", nil, ""},
		{"operator", "operate", nil, "tag:write"},
		{"operator", "supervise", nil, "tag:write"},
		{"platform", "", nil, "scope"},
		{"platform", "", []string{"designer"}, "scope"},
	}
	for _, c := range cases {
		err := covers(admin, c.realm, c.level, c.perms)
		if c.refused == "" {
			if err != nil {
				t.Errorf("%s %s: refused: %v", c.realm, c.level, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("%s %s %v: err = %v, want a refusal naming %s", c.realm, c.level, c.perms, err, c.refused)
		}
	}
	full := auth.Full("admin", auth.RealmPlatform, "rest")
	if err := covers(full, "platform", "", []string{"designer", "users_admin"}); err != nil {
		t.Errorf("a full grant may create a platform user: %v", err)
	}
}
