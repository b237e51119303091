package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Retention: blocks deleted by age, then by size, in short transactions.

// RunRetention runs the retention job now (it also runs every
// RetentionEvery) and returns its error.
func (h *History) RunRetention(ctx context.Context) error {
	return h.do(ctx, func() error { return h.runRetention(h.opts.now()) })
}

// runRetention deletes blocks by age, then by size, and records the
// outcome for Alarms.
func (h *History) runRetention(now time.Time) error {
	deleted, err := h.retain(now)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.RetentionRuns++
	h.st.RetentionDeleted += uint64(deleted)
	if err != nil {
		h.st.RetentionFailures++
		h.st.LastRetentionError = err
		if h.retErr == nil {
			h.retFrom = now
		}
		h.retErr = err
		h.log.Error("history retention failed; the history keeps growing", slog.Any("err", err))
		return fmt.Errorf("store: history retention: %w", err)
	}
	h.retErr = nil
	return nil
}

// retentionChunk is how many blocks one retention transaction deletes at
// most: short transactions, so a long retention run does not keep the pages
// it frees from being reused (bbolt README, "Caveats & Limitations").
const retentionChunk = 2000

func (h *History) retain(now time.Time) (int, error) {
	if h.opts.retentionHook != nil {
		if err := h.opts.retentionHook(); err != nil {
			return 0, err
		}
	}
	h.mu.RLock()
	ids := make([]uint32, 0, len(h.paths))
	for id := range h.paths {
		ids = append(ids, id)
	}
	h.mu.RUnlock()
	deleted := 0
	if h.opts.MaxAge > 0 {
		cutoff := now.Add(-h.opts.MaxAge).UnixNano()
		for len(ids) > 0 {
			n := 0
			var freed int64
			err := h.db.update(func(tx *bolt.Tx) error {
				data, hist := histDataBucket(tx)
				if data == nil {
					ids = nil
					return nil
				}
				n, freed = 0, 0
				for len(ids) > 0 && n < retentionChunk {
					tb := data.Bucket(u32Key(ids[0]))
					if tb == nil {
						ids = ids[1:]
						continue
					}
					var del [][]byte
					c := tb.Cursor()
					for k, v := c.First(); k != nil && n+len(del) < retentionChunk; k, v = c.Next() {
						hdr, err := readBlockHeader(v)
						if err != nil {
							return err
						}
						if hdr.last >= cutoff {
							break
						}
						del = append(del, clone(k))
						freed += int64(len(v) + 8)
					}
					for _, k := range del {
						if err := tb.Delete(k); err != nil {
							return err
						}
					}
					n += len(del)
					if n < retentionChunk {
						ids = ids[1:]
					}
				}
				return putBytes(hist, h.bytesNow()-freed)
			})
			if err != nil {
				return deleted, fmt.Errorf("by age: %w", err)
			}
			h.addBytes(-freed)
			deleted += n
		}
	}
	if h.opts.MaxBytes > 0 {
		for h.bytesNow() > h.opts.MaxBytes {
			n, err := h.deleteOldest(retentionChunk)
			if err != nil {
				return deleted, fmt.Errorf("by size: %w", err)
			}
			deleted += n
			if n == 0 {
				break
			}
		}
	}
	return deleted, nil
}

func histDataBucket(tx *bolt.Tx) (data, hist *bolt.Bucket) {
	hist = tx.Bucket(bucketHist)
	if hist == nil {
		return nil, nil
	}
	return hist.Bucket(histData), hist
}

func (h *History) bytesNow() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.bytes
}

func (h *History) addBytes(d int64) {
	h.mu.Lock()
	h.bytes = max(h.bytes+d, 0)
	h.mu.Unlock()
}

// deleteOldest deletes up to limit blocks, oldest first across all tags,
// stopping once the blocks fit MaxBytes.
func (h *History) deleteOldest(limit int) (int, error) {
	n := 0
	var freed int64
	err := h.db.update(func(tx *bolt.Tx) error {
		data, hist := histDataBucket(tx)
		if data == nil {
			return nil
		}
		n, freed = 0, 0
		type head struct {
			b *bolt.Bucket
			c *bolt.Cursor
			t int64
		}
		var heads []*head
		err := data.ForEachBucket(func(k []byte) error {
			b := data.Bucket(k)
			c := b.Cursor()
			if fk, _ := c.First(); fk != nil {
				heads = append(heads, &head{b: b, c: c, t: keyTime(fk)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		size := h.bytesNow()
		for n < limit && size-freed > h.opts.MaxBytes && len(heads) > 0 {
			oi := 0
			for i, hd := range heads {
				if hd.t < heads[oi].t {
					oi = i
				}
			}
			hd := heads[oi]
			k, v := hd.c.First()
			freed += int64(len(v) + 8)
			if err := hd.b.Delete(k); err != nil {
				return err
			}
			n++
			if fk, _ := hd.b.Cursor().First(); fk != nil {
				hd.c = hd.b.Cursor()
				hd.t = keyTime(fk)
			} else {
				heads = append(heads[:oi], heads[oi+1:]...)
			}
		}
		return putBytes(hist, size-freed)
	})
	if err != nil {
		return 0, err
	}
	h.addBytes(-freed)
	return n, nil
}
