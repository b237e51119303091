package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

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
			rec := decodeAuditRecord(seq, v)
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

// decodeAuditRecord decodes the stored record seq, so that what it returns
// always encodes as valid JSON in UTF-8, whatever was stored (records
// written before Enqueue checked their JSON included): Before and After
// pass validJSON; a record that does not decode at all comes back as
// action "audit.unreadable" with the decoding error as its detail, so one
// damaged record never hides the others.
func decodeAuditRecord(seq uint64, v []byte) AuditRecord {
	var rec AuditRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return AuditRecord{Seq: seq, Action: "audit.unreadable", Result: "unreadable",
			Detail: fmt.Sprintf("stored record %d does not decode: %v", seq, err)}
	}
	rec.Seq = seq
	rec.Before, rec.After = validJSON(rec.Before), validJSON(rec.After)
	return rec
}

// validJSON returns raw as valid JSON in UTF-8: unchanged when it is;
// with each invalid UTF-8 sequence replaced by U+FFFD when that makes it
// valid (RFC 8259 §8.1: JSON exchanged between systems is UTF-8); else
// the text as a JSON string. nil stays nil.
func validJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil || (utf8.Valid(raw) && json.Valid(raw)) {
		return raw
	}
	fixed := validUTF8(raw)
	if json.Valid(fixed) {
		return fixed
	}
	b, _ := json.Marshal(string(fixed)) // a string always encodes
	return b
}

// validUTF8 returns raw with each invalid UTF-8 sequence replaced by
// U+FFFD (raw itself when it is valid).
func validUTF8(raw []byte) []byte {
	if utf8.Valid(raw) {
		return raw
	}
	return bytes.ToValidUTF8(raw, []byte("\uFFFD"))
}
