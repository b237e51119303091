package store

import (
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// auditCarryChunk is how many records CarryAuditLog copies per write
// transaction (short transactions, as auditQueryMax).
const auditCarryChunk = 10000

// CarryAuditLog makes db's audit log src's: every record of src with its
// sequence number, in order, then the records of then appended after
// them (sequence numbers following src's). db's own audit records are
// replaced. A restore uses it so that restoring a backup never erases the
// appliance's audit trail (docs/appliance.md, "Backup and restore"): the
// restored store takes the log of the store it replaces. It returns how
// many records it copied from src. On an error db's log is partly
// copied; the restore that called it then fails and puts the old store
// back.
func (db *DB) CarryAuditLog(src *DB, then ...AuditRecord) (int, error) {
	var seq uint64
	if err := src.view(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		seq = b.Sequence()
		return nil
	}); err != nil {
		return 0, fmt.Errorf("store: carry audit log: %w", err)
	}
	if err := db.update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketAudit); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		_, err := tx.CreateBucket(bucketAudit)
		return err
	}); err != nil {
		return 0, fmt.Errorf("store: carry audit log: %w", err)
	}
	n := 0
	var after []byte
	for {
		var keys, vals [][]byte
		if err := src.view(func(tx *bolt.Tx) error {
			b, err := bucket(tx, bucketAudit)
			if err != nil {
				return err
			}
			c := b.Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); k != nil && string(k) == string(after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(keys) < auditCarryChunk; k, v = c.Next() {
				keys, vals = append(keys, append([]byte(nil), k...)), append(vals, append([]byte(nil), v...))
			}
			return nil
		}); err != nil {
			return n, fmt.Errorf("store: carry audit log: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		if err := db.update(func(tx *bolt.Tx) error {
			b, err := bucket(tx, bucketAudit)
			if err != nil {
				return err
			}
			b.FillPercent = 0.9
			for i := range keys {
				if err := b.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return n, fmt.Errorf("store: carry audit log: %w", err)
		}
		n += len(keys)
		after = keys[len(keys)-1]
	}
	err := db.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		if err := b.SetSequence(seq); err != nil {
			return err
		}
		for _, rec := range then {
			rec.Seq = 0
			if rec.Time.IsZero() {
				rec.Time = db.now()
			}
			rec.Time = rec.Time.UTC()
			data, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			s, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(u64Key(s), data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("store: carry audit log: %w", err)
	}
	return n, nil
}
