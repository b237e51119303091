package auth

import (
	"errors"
	"strings"
	"testing"
)

// TestGrant_CoversUser_UsersAdminCannotMintWiderUsers: a users_admin key
// holding only reads may create view operators, not operate/supervise
// operators nor platform users, whose sessions would hold more than the
// key (attack report: POST /users made a platform user from a read-only
// key); a full grant may create any.
func TestGrant_CoversUser_UsersAdminCannotMintWiderUsers(t *testing.T) {
	admin := Grant{Principal: "apikey:admin", Scopes: ReadScopes, WriteLevel: LevelView, Permissions: []Permission{UsersAdmin}}
	cases := []struct {
		realm   Realm
		level   Level
		perms   []Permission
		refused string
	}{
		{RealmOperator, LevelView, nil, ""},
		{RealmOperator, LevelOperate, nil, `"tag:write"`},
		{RealmOperator, LevelSupervise, nil, `"script:execute"`},
		{RealmPlatform, LevelNone, nil, `write level "design"`},
		{RealmPlatform, LevelNone, []Permission{Designer}, `permission "designer"`},
	}
	for _, c := range cases {
		err := admin.CoversUser("u", c.realm, c.level, c.perms)
		if c.refused == "" {
			if err != nil {
				t.Errorf("%s %s: refused: %v", c.realm, c.level, err)
			}
			continue
		}
		var de *DeniedError
		if !errors.As(err, &de) || de.Kind != "wider" || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("%s %s %v: err = %v, want a refusal naming %s", c.realm, c.level, c.perms, err, c.refused)
		}
	}
	if err := Full("admin", RealmPlatform, "rest").CoversUser("eng", RealmPlatform, LevelNone, []Permission{Designer, UsersAdmin}); err != nil {
		t.Errorf("a full grant may create a platform user: %v", err)
	}
}

// TestGrant_CoversUser_NamesEverythingLackingAndTheRemedy: the refusal
// names the user with its realm and level ("an operator", "a platform
// user"), every scope the key lacks at once (not only the first), and
// the whole grant a managing key needs, ready for --scopes.
func TestGrant_CoversUser_NamesEverythingLackingAndTheRemedy(t *testing.T) {
	key := Grant{Scopes: []Scope{TagRead, TagWrite}, WriteLevel: LevelDesign, Permissions: AllPermissions}
	err := key.CoversUser("op1", RealmOperator, LevelSupervise, nil)
	want := `user "op1" (an operator at level supervise): cannot grant scopes "alarm:read", "alarm:ack", "db:read", "db:write", ` +
		`"hist:read", "hist:write", "vars:read", "vars:write", "file:read", "file:write", "script:execute": the creating grant does not hold them; ` +
		`whoever creates such a user or sets its password can log in as it, so the key doing it must hold what its sessions hold: ` +
		`scopes tag:read,tag:write,alarm:read,alarm:ack,db:read,db:write,hist:read,hist:write,vars:read,vars:write,file:read,file:write,script:execute, ` +
		`write level supervise (docs/security.md, "Who may manage a user")`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	err = (Grant{Scopes: AllScopes, WriteLevel: LevelOperate}).CoversUser("eng", RealmPlatform, LevelNone, []Permission{Designer})
	if err == nil || !strings.HasPrefix(err.Error(), `user "eng" (a platform user): cannot grant permission "designer" and write level "design": the creating grant does not hold them (its write level is "operate")`) {
		t.Errorf("platform: %v", err)
	}
}
