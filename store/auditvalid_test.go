package store

import (
	"context"
	"encoding/json"
	"testing"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// TestAuditRecords_AlwaysValidJSON: whatever a stored record holds (raw
// invalid UTF-8 in "after", as records written before the check hold;
// bytes that do not decode at all), every read path returns records that
// encode as valid JSON in UTF-8, and a damaged record hides no other.
func TestAuditRecords_AlwaysValidJSON(t *testing.T) {
	db := openTest(t)
	stored := [][]byte{
		[]byte("{\"time\":\"2026-01-01T00:00:00Z\",\"action\":\"vars.set\",\"target\":\"k\",\"after\":{\"value\":\"a\xff\xfeb\"},\"result\":\"ok\"}"),
		[]byte("not json \xff"),
		[]byte(`{"time":"2026-01-01T00:00:01Z","action":"tag.write","target":"Line1/Pump/Setpoint","after":900,"result":"ok"}`),
	}
	err := db.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		for i, v := range stored {
			if err := b.Put(u64Key(uint64(i+1)), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := db.AuditRecords(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	recent, err := db.RecentAuditRecords(10, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, recs := range map[string][]AuditRecord{"AuditRecords": all, "RecentAuditRecords": recent} {
		if len(recs) != 3 {
			t.Fatalf("%s: %d records, want 3", name, len(recs))
		}
		out, err := json.Marshal(recs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("%s: output is not valid UTF-8 JSON: %q", name, out)
		}
	}
	if got := string(all[0].After); got != "{\"value\":\"a\uFFFDb\"}" {
		t.Errorf("after = %s, want the run of invalid bytes as one U+FFFD", got)
	}
	if all[1].Seq != 2 || all[1].Action != "audit.unreadable" || all[1].Result != "unreadable" {
		t.Errorf("undecodable record = %+v, want seq 2, action audit.unreadable", all[1])
	}
	if all[2].Target != "Line1/Pump/Setpoint" || string(all[2].After) != "900" {
		t.Errorf("record after a damaged one = %+v", all[2])
	}
}

// TestAuditLog_Enqueue_InvalidUTF8Stored: a record whose "after" holds
// invalid UTF-8 is stored with U+FFFD in its place.
func TestAuditLog_Enqueue_InvalidUTF8Stored(t *testing.T) {
	db := openTest(t)
	log := NewAuditLog(db, AuditOptions{}, nil)
	if err := log.Enqueue(AuditRecord{Action: "vars.set", After: json.RawMessage("\"x\xffy\"")}); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := db.view(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		_, raw = b.Cursor().First()
		raw = append([]byte(nil), raw...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(raw) || !json.Valid(raw) {
		t.Fatalf("stored record %q is not valid UTF-8 JSON", raw)
	}
}
