package store

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Keys for timestamps 9, 10, 11 are 8-byte big-endian, so a cursor
// returns 9, 10, 11; decimal-string keys would return "10", "11", "9".
func TestKeys_U64_NumericOrder(t *testing.T) {
	db := openTest(t)
	name := []byte("u64_order")
	for _, tc := range []struct {
		name      string
		key       func(uint64) []byte
		want      string
		wantRange string
	}{
		{"big-endian (ours)", u64Key, "[9 10 11]", "[9 10 11]"},
		{"decimal strings (the fault)", func(n uint64) []byte { return []byte(strconv.FormatUint(n, 10)) }, "[10 11 9]", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.update(func(tx *bolt.Tx) error {
				if tx.Bucket(name) != nil {
					if err := tx.DeleteBucket(name); err != nil {
						return err
					}
				}
				b, err := tx.CreateBucket(name)
				if err != nil {
					return err
				}
				for _, ts := range []uint64{11, 9, 10} {
					if err := b.Put(tc.key(ts), []byte(strconv.FormatUint(ts, 10))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			err = db.view(func(tx *bolt.Tx) error {
				c := tx.Bucket(name).Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					got = append(got, string(v))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("cursor order %v, want %s", got, tc.want)
			}
			// The range [9, 11] from Seek(9) to the key 11.
			got = nil
			err = db.view(func(tx *bolt.Tx) error {
				c := tx.Bucket(name).Cursor()
				for k, v := c.Seek(tc.key(9)); k != nil && bytes.Compare(k, tc.key(11)) <= 0; k, v = c.Next() {
					got = append(got, string(v))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != tc.wantRange {
				t.Errorf("range [9, 11] = %v, want %s", got, tc.wantRange)
			}
		})
	}
	for _, n := range []uint64{0, 9, 1 << 40, ^uint64(0)} {
		if got, err := keyU64(u64Key(n)); err != nil || got != n {
			t.Errorf("keyU64(u64Key(%d)) = %d, %v", n, got, err)
		}
	}
	if _, err := keyU64([]byte("10")); err == nil {
		t.Error("keyU64 accepted a 2-byte key")
	}
}

// Big-endian keys through the audit log: sequences 9, 10, 11 come back in numeric
// order from the cursor over the big-endian keys.
func TestDB_AuditRecords_KeyOrderAcrossDigits(t *testing.T) {
	db := openTest(t)
	log := NewAuditLog(db, AuditOptions{MaxBatch: 1}, nil)
	for i := 1; i <= 11; i++ {
		if err := log.Enqueue(AuditRecord{Action: "a", Detail: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := db.AuditRecords(8, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Detail))
	}
	if fmt.Sprint(got) != "[9:9 10:10 11:11]" {
		t.Errorf("AuditRecords(8) = %v, want [9:9 10:10 11:11]", got)
	}
}

// scan reads in chunks, resumes after the last key, copies what it hands
// out, and sees every key once.
func TestDB_Scan_Chunked(t *testing.T) {
	db := openTest(t)
	name := []byte("scan")
	err := db.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(name)
		if err != nil {
			return err
		}
		for i := range uint64(2500) {
			if err := b.Put(u64Key(i), u64Key(i*2)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		from  []byte
		chunk int
		first uint64
	}{
		{"all, default chunk", nil, 0, 0},
		{"from 1000, chunk 7", u64Key(1000), 7, 1000},
		{"chunk equals rest", u64Key(2000), 500, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := tc.first
			var held [][]byte
			err := db.scan(name, tc.from, tc.chunk, func(k, v []byte) error {
				n, err := keyU64(k)
				if err != nil {
					return err
				}
				if n != next {
					return fmt.Errorf("key %d, want %d", n, next)
				}
				if m, _ := keyU64(v); m != 2*n {
					return fmt.Errorf("value %d for key %d", m, n)
				}
				held = append(held, v)
				next++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != 2500 {
				t.Errorf("scan stopped at %d", next)
			}
			for i, v := range held { // copies stay valid after their transactions
				if m, _ := keyU64(v); m != 2*(tc.first+uint64(i)) {
					t.Fatalf("held value %d changed: %d", i, m)
				}
			}
		})
	}
}
