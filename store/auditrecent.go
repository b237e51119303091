package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// RecentAuditRecords returns up to limit committed audit records for which
// match reports true, newest first, looking at no more than scanMax of the
// newest records (so a panel asking for its last events never walks the
// whole log). limit <= 0 means 50; scanMax <= 0 means 10000. A nil match
// takes every record.
func (db *DB) RecentAuditRecords(limit, scanMax int, match func(AuditRecord) bool) ([]AuditRecord, error) {
	if limit <= 0 {
		limit = 50
	}
	if scanMax <= 0 {
		scanMax = 10000
	}
	var out []AuditRecord
	err := db.view(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		c := b.Cursor()
		seen := 0
		for k, v := c.Last(); k != nil && len(out) < limit && seen < scanMax; k, v = c.Prev() {
			seen++
			seq, err := keyU64(k)
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			var rec AuditRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("audit record %d: %w", seq, err)
			}
			rec.Seq = seq
			if match == nil || match(rec) {
				out = append(out, rec)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: recent audit records: %w", err)
	}
	return out, nil
}
