package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// keyProject is the project bucket's key for the current document.
var keyProject = []byte("current")

// PutProject stores doc as the project configuration, replacing the previous
// one. doc is one versioned JSON document (docs/architecture.md): it must be a JSON
// object, and the version it carries is its owner's to define and check;
// the store keeps the bytes as given. A doc that is not a JSON object wraps
// ErrInvalid and nothing is written.
func (db *DB) PutProject(doc []byte) error {
	if !json.Valid(doc) || !bytes.HasPrefix(bytes.TrimSpace(doc), []byte("{")) {
		return fmt.Errorf("store: project: not a JSON object: %w", ErrInvalid)
	}
	err := db.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketProject)
		if err != nil {
			return err
		}
		return b.Put(keyProject, doc)
	})
	if err != nil {
		return fmt.Errorf("store: put project: %w", err)
	}
	return nil
}

// Project returns a copy of the stored project document, or nil and no
// error when none was ever stored.
func (db *DB) Project() ([]byte, error) {
	var doc []byte
	err := db.view(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketProject)
		if err != nil {
			return err
		}
		doc = clone(b.Get(keyProject))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: project: %w", err)
	}
	return doc, nil
}

// PutMeta stores val under key in the meta bucket (small daemon state such
// as the bootstrap token's hash). An empty val is stored as empty, not
// deleted. The key "schema_version" belongs to the store and wraps
// ErrInvalid, as does an empty or over-long key.
func (db *DB) PutMeta(key string, val []byte) error {
	if err := checkKey("meta key", key); err != nil {
		return err
	}
	if key == keySchemaVersion {
		return fmt.Errorf("store: meta key %q is reserved for the store: %w", key, ErrInvalid)
	}
	if val == nil {
		val = []byte{}
	}
	err := db.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), val)
	})
	if err != nil {
		return fmt.Errorf("store: put meta %q: %w", key, err)
	}
	return nil
}

// DeleteMeta removes key from the meta bucket; a missing key is not an
// error. "schema_version" wraps ErrInvalid.
func (db *DB) DeleteMeta(key string) error {
	if err := checkKey("meta key", key); err != nil {
		return err
	}
	if key == keySchemaVersion {
		return fmt.Errorf("store: meta key %q is reserved for the store: %w", key, ErrInvalid)
	}
	err := db.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("store: delete meta %q: %w", key, err)
	}
	return nil
}

// Meta returns a copy of the value stored under key, or nil and no error
// when the key is absent.
func (db *DB) Meta(key string) ([]byte, error) {
	var val []byte
	err := db.view(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		val = clone(b.Get([]byte(key)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: meta %q: %w", key, err)
	}
	return val, nil
}
