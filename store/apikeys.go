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

// APIKey is an API key as stored (docs/api.md, REST "POST /apikeys"): the
// SHA-256 Hash of its secret (the token itself is never stored), the scopes,
// write level, permissions and tag prefixes it grants, when it expires (zero:
// never), when it was created and whether it was revoked. WriteLevel is a
// level name ("operate") or empty for none; Scopes and Permissions hold the
// contract's names (auth.Scope, auth.Permission).
type APIKey struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Hash        []byte    `json:"hash"`
	Scopes      []string  `json:"scopes,omitempty"`
	WriteLevel  string    `json:"write_level,omitempty"`
	Permissions []string  `json:"permissions,omitempty"`
	Prefixes    []string  `json:"prefixes,omitempty"`
	Expires     time.Time `json:"expires,omitzero"`
	Created     time.Time `json:"created"`
	Revoked     bool      `json:"revoked,omitempty"`
}

func (k APIKey) validate() error {
	if err := checkKey("api key id", k.ID); err != nil {
		return err
	}
	if k.WriteLevel != "" {
		if _, err := auth.ParseLevel(k.WriteLevel); err != nil {
			return fmt.Errorf("store: api key %q: %w: %w", k.ID, err, ErrInvalid)
		}
	}
	for _, s := range k.Scopes {
		if _, err := auth.ParseScope(s); err != nil {
			return fmt.Errorf("store: api key %q: %w: %w", k.ID, err, ErrInvalid)
		}
	}
	for _, p := range k.Permissions {
		if _, err := auth.ParsePermission(p); err != nil {
			return fmt.Errorf("store: api key %q: %w: %w", k.ID, err, ErrInvalid)
		}
	}
	return nil
}

// PutAPIKey stores k under k.ID, replacing a key with the same id. An empty
// id, an unknown scope, permission or write level wraps ErrInvalid and
// nothing is written.
func (db *DB) PutAPIKey(k APIKey) error {
	if err := k.validate(); err != nil {
		return err
	}
	b, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("store: api key %q: %w", k.ID, err)
	}
	err = db.update(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, bucketAPIKeys)
		if err != nil {
			return err
		}
		return bk.Put([]byte(k.ID), b)
	})
	if err != nil {
		return fmt.Errorf("store: put api key %q: %w", k.ID, err)
	}
	return nil
}

// APIKey returns the key id. An unknown id returns an error wrapping
// ErrNotFound (which also matches auth.ErrNotFound).
func (db *DB) APIKey(id string) (APIKey, error) {
	var k APIKey
	err := db.view(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, bucketAPIKeys)
		if err != nil {
			return err
		}
		v := bk.Get([]byte(id))
		if v == nil {
			return &notFoundError{what: "api key", id: id, auth: true}
		}
		return json.Unmarshal(v, &k)
	})
	if err != nil {
		if nf := (*notFoundError)(nil); errors.As(err, &nf) {
			return APIKey{}, err
		}
		return APIKey{}, fmt.Errorf("store: api key %q: %w", id, err)
	}
	return k, nil
}

// APIKeys returns every key, revoked ones included, ordered by id.
func (db *DB) APIKeys() ([]APIKey, error) {
	var out []APIKey
	err := db.view(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, bucketAPIKeys)
		if err != nil {
			return err
		}
		return bk.ForEach(func(id, v []byte) error {
			var k APIKey
			if err := json.Unmarshal(v, &k); err != nil {
				return fmt.Errorf("api key %q: %w", id, err)
			}
			out = append(out, k)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey marks the key id revoked, in one transaction; revoking a
// revoked key is not an error. An unknown id wraps ErrNotFound.
func (db *DB) RevokeAPIKey(id string) error {
	err := db.update(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, bucketAPIKeys)
		if err != nil {
			return err
		}
		v := bk.Get([]byte(id))
		if v == nil {
			return &notFoundError{what: "api key", id: id, auth: true}
		}
		var k APIKey
		if err := json.Unmarshal(v, &k); err != nil {
			return err
		}
		if k.Revoked {
			return nil
		}
		k.Revoked = true
		b, err := json.Marshal(k)
		if err != nil {
			return err
		}
		return bk.Put([]byte(id), b)
	})
	if err != nil {
		if nf := (*notFoundError)(nil); errors.As(err, &nf) {
			return err
		}
		return fmt.Errorf("store: revoke api key %q: %w", id, err)
	}
	return nil
}

// AuthKeyStore returns db as the auth.KeyStore the service layer passes to
// auth.NewKeys. Its Key wraps auth.ErrNotFound for an unknown id.
func (db *DB) AuthKeyStore() auth.KeyStore { return authKeys{db} }

type authKeys struct{ db *DB }

var _ auth.KeyStore = authKeys{}

func (a authKeys) PutKey(r auth.KeyRecord) error {
	k := APIKey{ID: r.ID, Name: r.Name, Hash: r.Hash, Prefixes: slices.Clone(r.Prefixes),
		Expires: r.Expires, Created: r.Created, Revoked: r.Revoked}
	if r.WriteLevel != auth.LevelNone {
		k.WriteLevel = r.WriteLevel.String()
	}
	for _, s := range r.Scopes {
		k.Scopes = append(k.Scopes, string(s))
	}
	for _, p := range r.Permissions {
		k.Permissions = append(k.Permissions, string(p))
	}
	return a.db.PutAPIKey(k)
}

func (a authKeys) Key(id string) (auth.KeyRecord, error) {
	k, err := a.db.APIKey(id)
	if err != nil {
		return auth.KeyRecord{}, err
	}
	return toKeyRecord(k)
}

func (a authKeys) Keys() ([]auth.KeyRecord, error) {
	ks, err := a.db.APIKeys()
	if err != nil {
		return nil, err
	}
	out := make([]auth.KeyRecord, 0, len(ks))
	for _, k := range ks {
		r, err := toKeyRecord(k)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func toKeyRecord(k APIKey) (auth.KeyRecord, error) {
	r := auth.KeyRecord{ID: k.ID, Name: k.Name, Hash: k.Hash, Prefixes: k.Prefixes,
		Expires: k.Expires, Created: k.Created, Revoked: k.Revoked}
	if k.WriteLevel != "" {
		l, err := auth.ParseLevel(k.WriteLevel)
		if err != nil {
			return auth.KeyRecord{}, fmt.Errorf("store: api key %q: %w", k.ID, err)
		}
		r.WriteLevel = l
	}
	for _, s := range k.Scopes {
		r.Scopes = append(r.Scopes, auth.Scope(s))
	}
	for _, p := range k.Permissions {
		r.Permissions = append(r.Permissions, auth.Permission(p))
	}
	return r, nil
}
