package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGrant_AllowsPath_WholeSegments(t *testing.T) {
	g := Grant{Prefixes: []string{"Line1"}}
	cases := map[string]bool{"Line1": true, "Line1/Pump": true, "Line10/Pump": false, "Line": false, "Other/Line1": false}
	for p, want := range cases {
		if got := g.AllowsPath(p); got != want {
			t.Errorf("AllowsPath(%q) = %v, want %v", p, got, want)
		}
	}
	if !(Grant{}).AllowsPath("anything") {
		t.Error("grant without prefixes must allow every path")
	}
}

func TestGrant_AllowsLevel(t *testing.T) {
	levels := []Level{LevelView, LevelOperate, LevelSupervise, LevelDesign}
	for _, gl := range levels {
		for _, tl := range levels {
			if got := (Grant{WriteLevel: gl}).AllowsLevel(tl); got != (gl >= tl) {
				t.Errorf("grant %s tag %s: %v", gl, tl, got)
			}
		}
	}
	if (Grant{}).AllowsLevel(LevelView) {
		t.Error("zero grant may write a view tag")
	}
}

func TestGrant_Intersect_NeverWidens(t *testing.T) {
	caller := Grant{Principal: "op", Scopes: []Scope{TagRead, TagWrite}, WriteLevel: LevelOperate, Prefixes: []string{"Line1"}}
	entry := Grant{Scopes: []Scope{TagRead, TagWrite, ScriptExecute, DBWrite}, WriteLevel: LevelDesign, Permissions: []Permission{Designer}}
	got := caller.Intersect(entry)
	if !slices.Equal(got.Scopes, []Scope{TagRead, TagWrite}) || got.WriteLevel != LevelOperate || len(got.Permissions) != 0 || got.Principal != "op" {
		t.Fatalf("intersect = %+v", got)
	}
	if got.AllowsPath("Line2/X") || !got.AllowsPath("Line1/X") {
		t.Fatal("prefixes widened")
	}
	disjoint := Grant{Prefixes: []string{"A"}}.Intersect(Grant{Prefixes: []string{"B"}})
	if disjoint.AllowsPath("A/x") || disjoint.AllowsPath("B/x") {
		t.Fatal("disjoint prefixes allow a path")
	}
	narrower := Grant{Prefixes: []string{"A"}}.Intersect(Grant{Prefixes: []string{"A/B"}})
	if narrower.AllowsPath("A/C") || !narrower.AllowsPath("A/B/C") {
		t.Fatalf("nested prefixes: %+v", narrower.Prefixes)
	}
}

// TestGrant_Expired_AtTheInstant: a grant is refused from its expiry
// instant on (at exactly Expires it is expired); a zero Expires never
// expires.
func TestGrant_Expired_AtTheInstant(t *testing.T) {
	exp := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := Grant{Expires: exp}
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{exp.Add(-time.Nanosecond), false},
		{exp, true},
		{exp.Add(time.Nanosecond), true},
	} {
		if got := g.Expired(c.now); got != c.want {
			t.Errorf("Expired(%s) = %v, want %v", c.now.Format(time.RFC3339Nano), got, c.want)
		}
	}
	if (Grant{}).Expired(time.Now()) {
		t.Error("a grant without expiry expired")
	}
}

// TestGrant_Covers: the one "never wider than its maker" rule: each kind of
// widening is refused naming it; a prefix-limited maker refuses a grant
// without prefixes and one with a wider prefix, naming its own prefixes.
func TestGrant_Covers(t *testing.T) {
	maker := Grant{Scopes: []Scope{TagRead, TagWrite}, WriteLevel: LevelOperate, Permissions: []Permission{UsersAdmin}, Prefixes: []string{"Line1"}}
	cases := []struct {
		name string
		want Grant
		text string // "" for covered
	}{
		{"within", Grant{Scopes: []Scope{TagRead}, WriteLevel: LevelView, Prefixes: []string{"Line1/Pump"}}, ""},
		{"same", maker, ""},
		{"scope", Grant{Scopes: []Scope{DBWrite}, Prefixes: []string{"Line1"}}, `cannot grant scope "db:write": the creating grant does not hold it`},
		{"permission", Grant{Permissions: []Permission{Designer}, Prefixes: []string{"Line1"}}, `cannot grant permission "designer"`},
		{"level", Grant{WriteLevel: LevelSupervise, Prefixes: []string{"Line1"}}, `cannot grant write level "supervise": above the creating grant's "operate"`},
		{"no prefixes", Grant{Scopes: []Scope{TagRead}}, `cannot grant every tag path: the creating grant is limited to prefixes ["Line1"]`},
		{"wider prefix", Grant{Prefixes: []string{"Line10"}}, `cannot grant prefix "Line10": outside the creating grant's prefixes ["Line1"]`},
	}
	for _, c := range cases {
		err := maker.Covers(c.want, "")
		if c.text == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		var de *DeniedError
		if !errors.As(err, &de) || de.Kind != "wider" || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: err = %v; want %q", c.name, err, c.text)
		}
	}
	if err := (Grant{}).Covers(Grant{Prefixes: []string{"A"}}, ""); err != nil {
		t.Errorf("a maker without prefixes refused a prefix-limited grant: %v", err)
	}
	if err := maker.Covers(Grant{Scopes: []Scope{DBWrite}}, "new API key"); err == nil || !strings.HasPrefix(err.Error(), "new API key: cannot grant") {
		t.Errorf("target not named: %v", err)
	}
}

// TestGrant_Intersect_NestedRunIsTheIntersection: a script called by a
// script runs with the intersection of its caller's grant and the entry's
// restriction: common scopes and permissions, the lower level, both
// prefix sets, the earlier expiry; the caller covers it.
func TestGrant_Intersect_NestedRunIsTheIntersection(t *testing.T) {
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	caller := Grant{Principal: "op", Realm: RealmOperator, Origin: "script:a.b", Scopes: []Scope{TagRead, TagWrite, ScriptExecute},
		WriteLevel: LevelSupervise, Permissions: []Permission{Designer}, Prefixes: []string{"Line1"}, Expires: early.Add(time.Hour)}
	restrict := Grant{Scopes: []Scope{TagRead, VarsRead, ScriptExecute}, WriteLevel: LevelOperate, Prefixes: []string{"Line1/Pump", "Line2"}, Expires: early}
	got := caller.Intersect(restrict)
	if !slices.Equal(got.Scopes, []Scope{TagRead, ScriptExecute}) || got.WriteLevel != LevelOperate || len(got.Permissions) != 0 ||
		!slices.Equal(got.Prefixes, []string{"Line1/Pump"}) || !got.Expires.Equal(early) || got.Principal != "op" || got.Origin != "script:a.b" {
		t.Fatalf("nested grant = %+v", got)
	}
	if err := caller.Covers(got, ""); err != nil {
		t.Fatalf("the caller does not cover the nested grant: %v", err)
	}
	if err := restrict.Covers(Grant{Scopes: got.Scopes, WriteLevel: got.WriteLevel, Prefixes: got.Prefixes}, ""); err != nil {
		t.Fatalf("the restriction does not cover the nested grant: %v", err)
	}
}

func TestDeniedError_NamesWhatIsMissing(t *testing.T) {
	err := Grant{}.RequireScope(TagWrite, "tag.write")
	var de *DeniedError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), `"tag:write"`) {
		t.Fatalf("err = %v", err)
	}
	if err := (Grant{}).RequirePermission(Designer, "PUT /scripts"); err == nil || !strings.Contains(err.Error(), "designer") {
		t.Fatalf("err = %v", err)
	}
}

type memKeys struct{ m map[string]KeyRecord }

func (s *memKeys) PutKey(k KeyRecord) error { s.m[k.ID] = k; return nil }
func (s *memKeys) Key(id string) (KeyRecord, error) {
	k, ok := s.m[id]
	if !ok {
		return KeyRecord{}, fmt.Errorf("key %s: %w", id, ErrNotFound)
	}
	return k, nil
}
func (s *memKeys) Keys() ([]KeyRecord, error) {
	var out []KeyRecord
	for _, k := range s.m {
		out = append(out, k)
	}
	return out, nil
}

func TestKeys_CreateAuthenticateRevoke(t *testing.T) {
	ks := NewKeys(&memKeys{m: map[string]KeyRecord{}})
	admin := Full("admin", RealmPlatform, "rest")
	id, tok, err := ks.Create(admin, KeyRecord{Name: "op", Scopes: []Scope{TagRead}, WriteLevel: LevelOperate, Prefixes: []string{"Line1"}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ks.Authenticate(tok)
	if err != nil {
		t.Fatal(err)
	}
	if g.Realm != RealmAPIKey || !g.HasScope(TagRead) || g.HasScope(TagWrite) || g.WriteLevel != LevelOperate || !slices.Equal(g.Prefixes, []string{"Line1"}) {
		t.Fatalf("grant %+v", g)
	}
	for _, bad := range []string{"", tok + "x", strings.Replace(tok, id, "0000000000000000", 1), "Bearer " + tok, "qbb_" + tok} {
		if _, err := ks.Authenticate(bad); !errors.Is(err, ErrBadCredentials) || errors.Is(err, ErrRevokedToken) || errors.Is(err, ErrExpiredToken) {
			t.Errorf("token %q: %v, want ErrBadCredentials, neither revoked nor expired", bad, err)
		}
	}
	if err := ks.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Authenticate(tok); !errors.Is(err, ErrBadCredentials) || !errors.Is(err, ErrRevokedToken) {
		t.Fatalf("revoked key: %v, want ErrRevokedToken (an ErrBadCredentials)", err)
	}
	// A wrong secret of a revoked key is unknown, not revoked: the
	// reason is only told to whoever holds the secret.
	if _, err := ks.Authenticate(tok + "x"); errors.Is(err, ErrRevokedToken) {
		t.Fatal("a wrong secret of a revoked key reported as revoked")
	}
}

func TestKeys_Expiry(t *testing.T) {
	ks := NewKeys(&memKeys{m: map[string]KeyRecord{}})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ks.now = func() time.Time { return now }
	_, tok, err := ks.Create(Full("a", RealmPlatform, ""), KeyRecord{Name: "tmp", Scopes: []Scope{TagRead}, Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Authenticate(tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := ks.Authenticate(tok); !errors.Is(err, ErrBadCredentials) || !errors.Is(err, ErrExpiredToken) {
		t.Fatalf("expired key: %v, want ErrExpiredToken (an ErrBadCredentials)", err)
	}
}

func TestKeys_CreateNeverExceedsCreator(t *testing.T) {
	ks := NewKeys(&memKeys{m: map[string]KeyRecord{}})
	creator := Grant{Scopes: []Scope{TagRead, TagWrite}, WriteLevel: LevelOperate, Permissions: []Permission{UsersAdmin}, Prefixes: []string{"Line1"}}
	cases := []struct {
		name string
		rec  KeyRecord
		need string
	}{
		{"scope", KeyRecord{Scopes: []Scope{DBWrite}}, "db:write"},
		{"level", KeyRecord{WriteLevel: LevelSupervise}, "supervise"},
		{"permission", KeyRecord{Permissions: []Permission{Designer}}, "designer"},
		{"prefix", KeyRecord{Prefixes: []string{"Line2"}}, "prefixes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ks.Create(creator, c.rec)
			if err == nil || !strings.Contains(err.Error(), c.need) {
				t.Fatalf("err = %v, want refusal naming %s", err, c.need)
			}
		})
	}
	// A prefix-limited creator names prefixes inside its own (Grant.Covers:
	// one behaviour for REST and auth, the key is refused rather than
	// silently given the creator's prefixes).
	_, tok, err := ks.Create(creator, KeyRecord{Name: "ok", Scopes: []Scope{TagRead}, WriteLevel: LevelView, Prefixes: []string{"Line1/Pump"}})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := ks.Authenticate(tok)
	if !slices.Equal(g.Prefixes, []string{"Line1/Pump"}) {
		t.Fatalf("key of a prefix-limited creator got prefixes %v", g.Prefixes)
	}
}

// TestKeys_Create_PrefixLimitedCreator: a creator limited to prefixes that
// asks for a key without prefixes (every tag path), or with a wider prefix,
// is refused with a *DeniedError naming the creator's prefixes; nothing is
// stored.
func TestKeys_Create_PrefixLimitedCreator(t *testing.T) {
	store := &memKeys{m: map[string]KeyRecord{}}
	ks := NewKeys(store)
	creator := Grant{Scopes: []Scope{TagRead}, WriteLevel: LevelView, Prefixes: []string{"Line1"}}
	for name, prefixes := range map[string][]string{"none": nil, "wider": {"Line1", "Line2"}, "parent": {""}} {
		_, _, err := ks.Create(creator, KeyRecord{Name: name, Scopes: []Scope{TagRead}, Prefixes: prefixes})
		var de *DeniedError
		if !errors.As(err, &de) || de.Kind != "wider" || !strings.Contains(err.Error(), `["Line1"]`) {
			t.Errorf("%s: err = %v; want a refusal naming the creator's prefixes", name, err)
		}
	}
	if len(store.m) != 0 {
		t.Fatalf("refused keys stored: %v", store.m)
	}
}

func TestKeys_Bootstrap(t *testing.T) {
	ks := NewKeys(&memKeys{m: map[string]KeyRecord{}})
	tok, hash, err := NewBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Authenticate(tok); err == nil {
		t.Fatal("bootstrap token valid before it is armed")
	}
	ks.SetBootstrapHash(hash)
	g, err := ks.Authenticate(tok)
	if err != nil || g.WriteLevel != LevelDesign || len(g.Scopes) != len(AllScopes) || len(g.Permissions) != len(AllPermissions) {
		t.Fatalf("bootstrap grant %+v %v", g, err)
	}
	ks.SetBootstrapHash(nil)
	if _, err := ks.Authenticate(tok); err == nil {
		t.Fatal("revoked bootstrap token accepted")
	}
}

func TestKeys_StillValid_RevocationStopsARunningGrant(t *testing.T) {
	ks := NewKeys(&memKeys{m: map[string]KeyRecord{}})
	id, tok, err := ks.Create(Full("a", RealmPlatform, ""), KeyRecord{Name: "run", Scopes: []Scope{TagWrite}, WriteLevel: LevelOperate})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := ks.Authenticate(tok)
	if err := ks.StillValid(g); err != nil {
		t.Fatal(err)
	}
	if err := ks.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if err := ks.StillValid(g); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked key's grant still valid: %v", err)
	}
	btok, hash, _ := NewBootstrapToken()
	ks.SetBootstrapHash(hash)
	bg, _ := ks.Authenticate(btok)
	ks.SetBootstrapHash(nil)
	if err := ks.StillValid(bg); err == nil {
		t.Fatal("bootstrap grant valid after provisioning")
	}
}
