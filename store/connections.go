package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketConnections holds system.db's connection records (name → record
// sealed by store/sqldb; the store never sees a secret in clear). Created
// by the first write.
var bucketConnections = []byte("connections")

// PutConnection stores the record of connection name (sqldb.ConnStore),
// committed before it returns.
func (db *DB) PutConnection(name string, rec []byte) error {
	if err := checkKey("connection name", name); err != nil {
		return err
	}
	err := db.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketConnections)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), rec)
	})
	if err != nil {
		return fmt.Errorf("store: put connection %q: %w", name, err)
	}
	return nil
}

// DeleteConnection removes the record of connection name; a missing one is
// not an error.
func (db *DB) DeleteConnection(name string) error {
	if err := checkKey("connection name", name); err != nil {
		return err
	}
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketConnections)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("store: delete connection %q: %w", name, err)
	}
	return nil
}

// Connections returns copies of every connection record, by name.
func (db *DB) Connections() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketConnections)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out[string(k)] = clone(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: connections: %w", err)
	}
	return out, nil
}
