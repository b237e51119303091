package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/auth"
)

// Buckets of users and their browser sessions. They are created by the
// first write (not by a migration, so files of schema version 1 take them
// without one); a missing bucket reads as empty.
var (
	bucketUsers    = []byte("users")
	bucketSessions = []byte("sessions")
)

// User is a person who logs in with a password, as stored (issue 7;
// docs/security.md "Levels, realms, scopes, grants"). Realm is "platform" or
// "operator"; Level an operator's level name ("operate"), empty for platform
// users; Permissions the contract's names; Hash the argon2id PHC string
// (never the password).
type User struct {
	Name        string    `json:"name"`
	Realm       string    `json:"realm"`
	Level       string    `json:"level,omitempty"`
	Permissions []string  `json:"permissions,omitempty"`
	Hash        string    `json:"hash"`
	Disabled    bool      `json:"disabled,omitempty"`
	Created     time.Time `json:"created"`
	Changed     time.Time `json:"changed"`
}

// Session is a browser session as stored: ID is the hex SHA-256 of the
// session token (the token is never stored), CSRF the session's CSRF token.
type Session struct {
	ID       string    `json:"id"`
	User     string    `json:"user"`
	CSRF     string    `json:"csrf"`
	Addr     string    `json:"addr,omitempty"`
	Created  time.Time `json:"created"`
	LastSeen time.Time `json:"last_seen"`
}

// PutUser stores u under u.Name, replacing a user of that name. An empty
// name, an unknown realm, level or permission wraps ErrInvalid.
func (db *DB) PutUser(u User) error {
	if err := checkKey("user name", u.Name); err != nil {
		return err
	}
	if u.Realm != string(auth.RealmPlatform) && u.Realm != string(auth.RealmOperator) {
		return fmt.Errorf("store: user %q: realm %q: %w", u.Name, u.Realm, ErrInvalid)
	}
	if u.Level != "" {
		if _, err := auth.ParseLevel(u.Level); err != nil {
			return fmt.Errorf("store: user %q: %w: %w", u.Name, err, ErrInvalid)
		}
	}
	for _, p := range u.Permissions {
		if _, err := auth.ParsePermission(p); err != nil {
			return fmt.Errorf("store: user %q: %w: %w", u.Name, err, ErrInvalid)
		}
	}
	return db.putJSON(bucketUsers, "user", u.Name, u)
}

// User returns the user name; an unknown name wraps ErrNotFound (which also
// matches auth.ErrNotFound).
func (db *DB) User(name string) (User, error) {
	var u User
	err := db.getJSON(bucketUsers, "user", name, &u)
	return u, err
}

// Users returns every user, disabled ones included, ordered by name.
func (db *DB) Users() ([]User, error) {
	var out []User
	err := db.eachJSON(bucketUsers, "user", func(v []byte) error {
		var u User
		if err := json.Unmarshal(v, &u); err != nil {
			return err
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

// PutSession stores s under s.ID, replacing a session with that id.
func (db *DB) PutSession(s Session) error {
	if err := checkKey("session id", s.ID); err != nil {
		return err
	}
	return db.putJSON(bucketSessions, "session", s.ID, s)
}

// DeleteSession removes the session id; a missing one is not an error.
func (db *DB) DeleteSession(id string) error {
	if err := checkKey("session id", id); err != nil {
		return err
	}
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

// Sessions returns every stored session, ordered by id.
func (db *DB) Sessions() ([]Session, error) {
	var out []Session
	err := db.eachJSON(bucketSessions, "session", func(v []byte) error {
		var s Session
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func (db *DB) putJSON(name []byte, what, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: %s %q: %w", what, key, err)
	}
	err = db.update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		return bk.Put([]byte(key), b)
	})
	if err != nil {
		return fmt.Errorf("store: put %s %q: %w", what, key, err)
	}
	return nil
}

func (db *DB) getJSON(name []byte, what, key string, v any) error {
	err := db.view(func(tx *bolt.Tx) error {
		var raw []byte
		if bk := tx.Bucket(name); bk != nil && key != "" {
			raw = bk.Get([]byte(key))
		}
		if raw == nil {
			return &notFoundError{what: what, id: key, auth: true}
		}
		return json.Unmarshal(raw, v) // Unmarshal copies out of the page
	})
	if err != nil {
		if nf := (*notFoundError)(nil); errors.As(err, &nf) {
			return err
		}
		return fmt.Errorf("store: %s %q: %w", what, key, err)
	}
	return nil
}

func (db *DB) eachJSON(name []byte, what string, fn func(v []byte) error) error {
	err := db.view(func(tx *bolt.Tx) error {
		bk := tx.Bucket(name)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			if err := fn(v); err != nil {
				return fmt.Errorf("%s %q: %w", what, k, err)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("store: %ss: %w", what, err)
	}
	return nil
}

// AuthUserStore returns db as the auth.UserStore the service layer passes to
// auth.NewUsers. Its User wraps auth.ErrNotFound for an unknown name.
func (db *DB) AuthUserStore() auth.UserStore { return authUsers{db} }

// AuthSessionStore returns db as the auth.SessionStore the service layer passes
// to auth.NewSessions.
func (db *DB) AuthSessionStore() auth.SessionStore { return authSessions{db} }

type authUsers struct{ db *DB }

var _ auth.UserStore = authUsers{}

func (a authUsers) PutUser(r auth.UserRecord) error {
	u := User{Name: r.Name, Realm: string(r.Realm), Hash: r.Hash, Disabled: r.Disabled,
		Created: r.Created, Changed: r.Changed}
	if r.Level != auth.LevelNone {
		u.Level = r.Level.String()
	}
	for _, p := range r.Permissions {
		u.Permissions = append(u.Permissions, string(p))
	}
	return a.db.PutUser(u)
}

func (a authUsers) User(name string) (auth.UserRecord, error) {
	u, err := a.db.User(name)
	if err != nil {
		return auth.UserRecord{}, err
	}
	return toUserRecord(u)
}

func (a authUsers) Users() ([]auth.UserRecord, error) {
	us, err := a.db.Users()
	if err != nil {
		return nil, err
	}
	out := make([]auth.UserRecord, 0, len(us))
	for _, u := range us {
		r, err := toUserRecord(u)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func toUserRecord(u User) (auth.UserRecord, error) {
	r := auth.UserRecord{Name: u.Name, Realm: auth.Realm(u.Realm), Hash: u.Hash, Disabled: u.Disabled,
		Created: u.Created, Changed: u.Changed}
	if u.Level != "" {
		l, err := auth.ParseLevel(u.Level)
		if err != nil {
			return auth.UserRecord{}, fmt.Errorf("store: user %q: %w", u.Name, err)
		}
		r.Level = l
	}
	for _, p := range u.Permissions {
		r.Permissions = append(r.Permissions, auth.Permission(p))
	}
	return r, nil
}

type authSessions struct{ db *DB }

var _ auth.SessionStore = authSessions{}

func (a authSessions) PutSession(r auth.SessionRecord) error {
	return a.db.PutSession(Session(r))
}

func (a authSessions) DeleteSession(id string) error { return a.db.DeleteSession(id) }

func (a authSessions) Sessions() ([]auth.SessionRecord, error) {
	ss, err := a.db.Sessions()
	if err != nil {
		return nil, err
	}
	out := make([]auth.SessionRecord, len(ss))
	for i, s := range ss {
		out[i] = auth.SessionRecord(s)
	}
	return slices.Clip(out), nil
}
