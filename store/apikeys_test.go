package store_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/storetest"
)

func TestDB_APIKeys(t *testing.T) {
	db := storetest.MustOpen(t)
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a := store.APIKey{ID: "00000000000000aa", Name: "scada", Hash: []byte{1, 2, 3},
		Scopes: []string{"tag:read", "tag:write"}, WriteLevel: "operate",
		Permissions: []string{"designer"}, Prefixes: []string{"Line1"},
		Expires: created.Add(24 * time.Hour), Created: created}
	b := store.APIKey{ID: "00000000000000bb", Name: "reader", Hash: []byte{4},
		Scopes: []string{"tag:read"}, Created: created}
	for _, k := range []store.APIKey{b, a} {
		if err := db.PutAPIKey(k); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.APIKey(a.ID)
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Errorf("APIKey = %+v, %v; want %+v", got, err, a)
	}
	all, err := db.APIKeys()
	if err != nil || len(all) != 2 || all[0].ID != a.ID || all[1].ID != b.ID {
		t.Errorf("APIKeys = %+v, %v; want a, b by id", all, err)
	}

	if err := db.RevokeAPIKey(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeAPIKey(b.ID); err != nil {
		t.Errorf("second revoke = %v, want nil", err)
	}
	if got, _ := db.APIKey(b.ID); !got.Revoked || got.Name != "reader" {
		t.Errorf("after revoke: %+v", got)
	}

	for _, id := range []string{"absent", ""} {
		_, err := db.APIKey(id)
		if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("APIKey(%q) = %v, want ErrNotFound (store and auth)", id, err)
		}
	}
	if err := db.RevokeAPIKey("absent"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeAPIKey(absent) = %v, want ErrNotFound", err)
	}

	for name, k := range map[string]store.APIKey{
		"empty id":   {Name: "x"},
		"scope":      {ID: "x", Scopes: []string{"tag:everything"}},
		"level":      {ID: "x", WriteLevel: "root"},
		"permission": {ID: "x", Permissions: []string{"god"}},
	} {
		if err := db.PutAPIKey(k); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutAPIKey(%s) = %v, want ErrInvalid", name, err)
		}
	}
}

// The store is the auth.KeyStore the daemon wires: keys created, checked and
// revoked through auth.Keys persist in the store.
func TestDB_AuthKeyStore_WithAuthKeys(t *testing.T) {
	db := storetest.MustOpen(t)
	keys := auth.NewKeys(db.AuthKeyStore())
	creator := auth.Full("admin", auth.RealmPlatform, "rest")
	id, token, err := keys.Create(creator, auth.KeyRecord{Name: "line1",
		Scopes: []auth.Scope{auth.TagRead, auth.TagWrite}, WriteLevel: auth.LevelSupervise,
		Permissions: []auth.Permission{auth.Designer}, Prefixes: []string{"Line1"}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := keys.Authenticate(token)
	if err != nil {
		t.Fatal(err)
	}
	if g.WriteLevel != auth.LevelSupervise || !g.HasScope(auth.TagWrite) || !g.HasPermission(auth.Designer) ||
		!g.AllowsPath("Line1/Pump") || g.AllowsPath("Line2/Pump") {
		t.Errorf("grant from stored key: %+v", g)
	}
	stored, err := db.APIKey(id)
	if err != nil || stored.WriteLevel != "supervise" || len(stored.Hash) != 32 {
		t.Errorf("stored key = %+v, %v", stored, err)
	}
	if err := keys.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(token); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("revoked key authenticated: %v", err)
	}
	if err := keys.Revoke("ffffffffffffffff"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("revoke unknown = %v, want auth.ErrNotFound", err)
	}
	list, err := keys.List()
	if err != nil || len(list) != 1 || !list[0].Revoked {
		t.Errorf("List = %+v, %v", list, err)
	}
}
