package store

import (
	"fmt"
	"log/slog"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/auth"
)

// authErrNotFound is auth's sentinel, which API-key lookups also match.
var authErrNotFound = auth.ErrNotFound

// SchemaVersion is the schema this build writes. Open migrates older files
// up to it and refuses newer ones (ErrSchemaTooNew).
const SchemaVersion = 1

// Top-level buckets.
var (
	bucketMeta       = []byte("meta")
	bucketProject    = []byte("project")
	bucketLastValues = []byte("last_values")
	bucketAPIKeys    = []byte("apikeys")
	bucketScripts    = []byte("scripts")
	bucketAudit      = []byte("audit")
)

// keySchemaVersion is the meta key holding the schema version as an 8-byte
// big-endian integer. PutMeta refuses it.
const keySchemaVersion = "schema_version"

// migration moves the schema from version to-1 to version to. It runs inside
// the write transaction that records the new version, so a failed migration
// leaves the file as it was.
type migration struct {
	to   uint64
	name string
	fn   func(tx *bolt.Tx) error
}

// migrations are run in order; each entry's to is its index + 1. To change
// the schema, append a migration and raise SchemaVersion.
var migrations = []migration{
	{to: 1, name: "create buckets", fn: func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketProject, bucketLastValues, bucketAPIKeys, bucketScripts, bucketAudit} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %q: %w", name, err)
			}
		}
		return nil
	}},
}

// readSchemaVersion returns the stored version; 0 when the file has none
// (a new file).
func readSchemaVersion(tx *bolt.Tx) (uint64, error) {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0, nil
	}
	v := b.Get([]byte(keySchemaVersion))
	if v == nil {
		return 0, nil
	}
	n, err := keyU64(v)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return n, nil
}

// migrate brings the file to the last version of ms in one write
// transaction, running each missing migration in order, and returns the
// version reached.
func (db *DB) migrate(ms []migration) (uint64, error) {
	target := uint64(len(ms))
	var from, reached uint64
	err := db.update(func(tx *bolt.Tx) error {
		v, err := readSchemaVersion(tx)
		if err != nil {
			return err
		}
		from, reached = v, v
		if v > target {
			return fmt.Errorf("%w: file has version %d, this build knows up to %d", ErrSchemaTooNew, v, target)
		}
		for i, m := range ms {
			if m.to != uint64(i+1) {
				return fmt.Errorf("migration %q: numbered %d at position %d", m.name, m.to, i+1)
			}
			if m.to <= v {
				continue
			}
			if err := m.fn(tx); err != nil {
				return fmt.Errorf("migration to version %d (%s): %w", m.to, m.name, err)
			}
			reached = m.to
		}
		if reached == v {
			return nil
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put([]byte(keySchemaVersion), u64Key(reached))
	})
	if err != nil {
		return from, err
	}
	if reached != from {
		db.logger.Info("store schema migrated", slog.String("path", db.path), slog.Uint64("from", from), slog.Uint64("to", reached))
	}
	return reached, nil
}

// checkSchema is migrate for a read-only open: it refuses a file that is
// newer than this build, or older (it cannot be migrated read-only).
func (db *DB) checkSchema() (uint64, error) {
	var v uint64
	err := db.view(func(tx *bolt.Tx) error {
		var err error
		v, err = readSchemaVersion(tx)
		return err
	})
	switch {
	case err != nil:
		return 0, err
	case v > SchemaVersion:
		return v, fmt.Errorf("%w: file has version %d, this build knows up to %d", ErrSchemaTooNew, v, SchemaVersion)
	case v < SchemaVersion:
		return v, fmt.Errorf("schema version %d needs migrating to %d; open it read-write once (the daemon does): %w", v, SchemaVersion, ErrReadOnly)
	}
	return v, nil
}

// SchemaVersion returns the schema version recorded in the file.
func (db *DB) SchemaVersion() (uint64, error) {
	var v uint64
	err := db.view(func(tx *bolt.Tx) error {
		var err error
		v, err = readSchemaVersion(tx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: schema version: %w", err)
	}
	return v, nil
}
