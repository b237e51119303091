package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/storetest"
)

func TestDB_Users_PutGetListAndNotFound(t *testing.T) {
	db := storetest.MustOpen(t)
	if us, err := db.Users(); err != nil || len(us) != 0 {
		t.Fatalf("Users on a fresh store = %v, %v", us, err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	op := store.User{Name: "op", Realm: "operator", Level: "operate", Hash: "$argon2id$x", Created: now, Changed: now}
	eng := store.User{Name: "eng", Realm: "platform", Permissions: []string{"designer", "users_admin"}, Hash: "$argon2id$y", Created: now, Changed: now}
	for _, u := range []store.User{op, eng} {
		if err := db.PutUser(u); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.User("op"); err != nil || !reflect.DeepEqual(got, op) {
		t.Errorf("User(op) = %+v, %v", got, err)
	}
	all, err := db.Users()
	if err != nil || len(all) != 2 || all[0].Name != "eng" || all[1].Name != "op" {
		t.Errorf("Users = %+v, %v; want eng, op", all, err)
	}
	for _, n := range []string{"absent", ""} {
		if _, err := db.User(n); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("User(%q) = %v, want ErrNotFound (store and auth)", n, err)
		}
	}
	for name, u := range map[string]store.User{
		"empty name": {Realm: "operator"},
		"realm":      {Name: "x", Realm: "root"},
		"level":      {Name: "x", Realm: "operator", Level: "god"},
		"permission": {Name: "x", Realm: "platform", Permissions: []string{"root"}},
	} {
		if err := db.PutUser(u); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: PutUser = %v, want ErrInvalid", name, err)
		}
	}
}

func TestDB_Sessions_PutDeleteList(t *testing.T) {
	db := storetest.MustOpen(t)
	if err := db.DeleteSession("absent"); err != nil {
		t.Fatalf("DeleteSession on a fresh store: %v", err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := store.Session{ID: "ab", User: "op", CSRF: "c", Addr: "127.0.0.1", Created: now, LastSeen: now}
	if err := db.PutSession(s); err != nil {
		t.Fatal(err)
	}
	got, err := db.Sessions()
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], s) {
		t.Fatalf("Sessions = %+v, %v", got, err)
	}
	if err := db.DeleteSession("ab"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Sessions(); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
}

func TestDB_AuthStores_RoundTripThroughAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), store.FileName)
	db, err := store.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	users := auth.NewUsers(db.AuthUserStore(), auth.UsersOptions{Params: auth.PasswordParams{Time: 1, MemoryKiB: 64, Threads: 1, SaltLen: 16, KeyLen: 32}})
	if err := users.Add(auth.UserRecord{Name: "op", Realm: auth.RealmOperator, Level: auth.LevelSupervise}, "password1"); err != nil {
		t.Fatal(err)
	}
	if err := users.Add(auth.UserRecord{Name: "eng", Realm: auth.RealmPlatform, Permissions: auth.AllPermissions}, "password1"); err != nil {
		t.Fatal(err)
	}
	sess, err := auth.NewSessions(db.AuthSessionStore(), users, auth.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := users.Login("op", "password1", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := sess.Create(u, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart: the session and the users survive.
	db, err = store.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	users = auth.NewUsers(db.AuthUserStore(), auth.UsersOptions{})
	sess, err = auth.NewSessions(db.AuthSessionStore(), users, auth.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sess.Lookup(tok, true)
	if err != nil || info.User != "op" || info.Level != auth.LevelSupervise || info.Realm != auth.RealmOperator {
		t.Fatalf("after reopen: %+v %v", info, err)
	}
	eng, err := users.User("eng")
	if err != nil || len(eng.Permissions) != len(auth.AllPermissions) || eng.Level != auth.LevelNone {
		t.Fatalf("eng = %+v, %v", eng, err)
	}
}

func TestDB_RecentAuditRecords_NewestFirstFiltered(t *testing.T) {
	db := storetest.MustOpen(t)
	log := store.NewAuditLog(db, store.AuditOptions{}, nil)
	for i := range 10 {
		origin := "rest"
		if i%2 == 0 {
			origin = "liveview:pump1"
		}
		if err := log.Enqueue(store.AuditRecord{Action: "tag.write", Origin: origin, Target: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := db.RecentAuditRecords(3, 0, func(r store.AuditRecord) bool { return r.Origin == "liveview:pump1" })
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range got {
		targets = append(targets, r.Target)
	}
	if !reflect.DeepEqual(targets, []string{"8", "6", "4"}) || got[0].Seq != 9 {
		t.Fatalf("targets %v (first seq %d), want [8 6 4] newest first", targets, got[0].Seq)
	}
	got, err = db.RecentAuditRecords(10, 4, nil)
	if err != nil || len(got) != 4 {
		t.Fatalf("scanMax 4: %d records, %v", len(got), err)
	}
}
