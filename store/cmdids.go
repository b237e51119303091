package store

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketCommandIDs remembers the ids of the supervisor commands seen
// (docs/mqtt.md, replay protection): id → when it was seen (8 bytes, Unix
// nanoseconds). Created by the first write.
var bucketCommandIDs = []byte("mqtt_command_ids")

// CommandIDs remembers supervisor command ids across restarts, so a
// command replayed within the window is refused.
type CommandIDs struct{ db *DB }

// CommandIDs returns the command-id memory of db.
func (db *DB) CommandIDs() *CommandIDs { return &CommandIDs{db: db} }

// Remember records id as seen at now, committed before it returns, and
// reports whether it had been seen within window before (then nothing is
// changed). Ids seen longer ago than window are forgotten on the way, so
// the bucket holds at most a window's worth.
func (c *CommandIDs) Remember(id string, now time.Time, window time.Duration) (seen bool, err error) {
	if err := checkKey("command id", id); err != nil {
		return false, err
	}
	err = c.db.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCommandIDs)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(id)); len(v) == 8 {
			at := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			if now.Sub(at) <= window {
				seen = true
				return nil
			}
		}
		if err := b.Put([]byte(id), u64Key(uint64(now.UnixNano()))); err != nil {
			return err
		}
		return forgetOld(b, now, window)
	})
	if err != nil {
		return false, fmt.Errorf("store: command ids: %w", err)
	}
	return seen, nil
}

// forgetOld deletes up to 64 ids older than window (amortised: each
// Remember cleans a little).
func forgetOld(b *bolt.Bucket, now time.Time, window time.Duration) error {
	var old [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(old) < 64; k, v = c.Next() {
		if len(v) == 8 && now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(v)))) > window {
			old = append(old, clone(k))
		}
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
