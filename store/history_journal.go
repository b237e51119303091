package store

import (
	"encoding/binary"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"
)

// The journal and the blocks: committed samples wait in the journal (one
// record per group commit) and are folded into per-tag blocks at
// checkpoints; the open series are the journal's samples in memory, which
// queries merge with the blocks.

// openSeries is one tag's journal samples, as blocks in arrival order.
type openSeries struct {
	blocks []*blockBuf
	sorted bool // every sample at or after every earlier one
	max    int64
}

func (se *openSeries) add(s sample) error {
	if len(se.blocks) == 0 {
		se.sorted, se.max = true, s.t
	}
	if s.t < se.max {
		se.sorted = false
	}
	se.max = max(se.max, s.t)
	if len(se.blocks) == 0 || se.blocks[len(se.blocks)-1].full() {
		se.blocks = append(se.blocks, &blockBuf{})
	}
	return se.blocks[len(se.blocks)-1].add(s)
}

func (se *openSeries) each(fn func(sample) bool) error {
	for _, bb := range se.blocks {
		if err := eachSample(bb.data, bb.base, bb.count, fn); err != nil {
			return err
		}
	}
	return nil
}

// load reads ids, the byte count and the journal.
func (h *History) load() error {
	return h.db.view(func(tx *bolt.Tx) error {
		hist := tx.Bucket(bucketHist)
		if hist == nil {
			return nil
		}
		if tags := hist.Bucket(histTags); tags != nil {
			h.nextID = uint32(tags.Sequence())
			err := tags.ForEach(func(k, v []byte) error {
				if len(v) != 4 {
					return fmt.Errorf("tag %q: id of %d bytes", k, len(v))
				}
				id := binary.BigEndian.Uint32(v)
				h.ids[string(k)] = id
				h.paths[id] = string(k)
				return nil
			})
			if err != nil {
				return err
			}
		}
		if meta := hist.Bucket(histMeta); meta != nil {
			if v := meta.Get(keyBytes); len(v) == 8 {
				h.bytes = int64(binary.BigEndian.Uint64(v))
			}
		}
		if j := hist.Bucket(histJournal); j != nil {
			return j.ForEach(func(k, v []byte) error {
				if err := h.replay(v); err != nil {
					return fmt.Errorf("journal record %x: %w", k, err)
				}
				return nil
			})
		}
		return nil
	})
}

// replay adds one journal record's samples to the open series.
func (h *History) replay(rec []byte) error {
	for len(rec) > 0 {
		id, n := binary.Uvarint(rec)
		if n <= 0 {
			return errBlockCorrupt
		}
		t, m := binary.Varint(rec[n:])
		if m <= 0 {
			return errBlockCorrupt
		}
		q, sc, qn, err := readQuality(rec[n+m:])
		if err != nil {
			return err
		}
		v, k, err := readHistValue(rec[n+m+qn:])
		if err != nil {
			return err
		}
		rec = rec[n+m+qn+k:]
		if err := h.openFor(uint32(id)).add(sample{t: t, q: q, sc: sc, v: v}); err != nil {
			return err
		}
		h.openN++
	}
	return nil
}

func (h *History) openFor(id uint32) *openSeries {
	se := h.open[id]
	if se == nil {
		se = &openSeries{}
		h.open[id] = se
	}
	return se
}

func u32Key(id uint32) []byte {
	var k [4]byte
	binary.BigEndian.PutUint32(k[:], id)
	return k[:]
}

// checkpoint folds every open series into its tag's blocks and empties the
// journal, in one transaction.
func (h *History) checkpoint() error {
	h.ckMu.Lock()
	defer h.ckMu.Unlock()
	var added int64
	err := h.db.update(func(tx *bolt.Tx) error {
		hist, err := tx.CreateBucketIfNotExists(bucketHist)
		if err != nil {
			return err
		}
		data, err := hist.CreateBucketIfNotExists(histData)
		if err != nil {
			return err
		}
		for id, se := range h.open {
			tb, err := data.CreateBucketIfNotExists(u32Key(id))
			if err != nil {
				return err
			}
			n, err := foldSeries(tb, se)
			if err != nil {
				return fmt.Errorf("tag %q: %w", h.paths[id], err)
			}
			added += n
		}
		if hist.Bucket(histJournal) != nil {
			if err := hist.DeleteBucket(histJournal); err != nil {
				return err
			}
		}
		if _, err := hist.CreateBucket(histJournal); err != nil {
			return err
		}
		return putBytes(hist, h.bytes+added)
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.st.CheckpointFailures++
		return fmt.Errorf("store: history checkpoint: %w", err)
	}
	h.bytes += added
	h.open = map[uint32]*openSeries{}
	h.openN = 0
	h.st.Checkpoints++
	return nil
}

func putBytes(hist *bolt.Bucket, n int64) error {
	meta, err := hist.CreateBucketIfNotExists(histMeta)
	if err != nil {
		return err
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(max(n, 0)))
	return meta.Put(keyBytes, v[:])
}

// foldSeries writes se into its tag's bucket tb and returns the bytes the
// blocks grew by. In-order samples after the last persisted one go in as
// they are; late samples are merged into the block they belong to, so
// blocks never overlap.
func foldSeries(tb *bolt.Bucket, se *openSeries) (int64, error) {
	tb.FillPercent = 1 // blocks are appended in time order
	last := int64(math.MinInt64)
	if k, v := tb.Cursor().Last(); k != nil {
		hdr, err := readBlockHeader(v)
		if err != nil {
			return 0, err
		}
		last = hdr.last
	}
	var added int64
	put := func(bb *blockBuf) error {
		enc := bb.encode()
		added += int64(len(enc) + 8)
		return tb.Put(timeKey(bb.base), enc)
	}
	if se.sorted && len(se.blocks) > 0 && se.blocks[0].base > last {
		for _, bb := range se.blocks {
			if err := put(bb); err != nil {
				return 0, err
			}
		}
		return added, nil
	}
	var ss []sample
	if err := se.each(func(s sample) bool { ss = append(ss, s); return true }); err != nil {
		return 0, err
	}
	sortSamples(ss)
	i := 0
	for i < len(ss) && ss[i].t <= last {
		i++
	}
	if i > 0 {
		tb.FillPercent = 0.5 // merging rewrites blocks in the middle
		n, err := mergeLate(tb, ss[:i])
		if err != nil {
			return 0, err
		}
		added += n
	}
	blocks, err := encodeSorted(ss[i:])
	if err != nil {
		return 0, err
	}
	for _, bb := range blocks {
		if err := put(bb); err != nil {
			return 0, err
		}
	}
	return added, nil
}

// mergeLate merges sorted samples that are not after the tag's last
// persisted sample into the blocks they belong to: the block with the
// greatest first time at or before the sample (or the first block).
func mergeLate(tb *bolt.Bucket, late []sample) (int64, error) {
	groups := map[string][]sample{}
	var order []string
	c := tb.Cursor()
	for _, s := range late {
		k, _ := c.Seek(timeKey(s.t))
		if k == nil || keyTime(k) > s.t {
			k, _ = c.Prev()
			if k == nil {
				k, _ = c.First()
			}
		}
		key := string(k)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], s)
	}
	var delta int64
	for _, key := range order {
		old := tb.Get([]byte(key))
		ss, err := appendBlockSamples(nil, old)
		if err != nil {
			return 0, err
		}
		delta -= int64(len(old) + 8)
		ss = append(ss, groups[key]...)
		sortSamples(ss)
		if err := tb.Delete([]byte(key)); err != nil {
			return 0, err
		}
		blocks, err := encodeSorted(ss)
		if err != nil {
			return 0, err
		}
		for _, bb := range blocks {
			enc := bb.encode()
			delta += int64(len(enc) + 8)
			if err := tb.Put(timeKey(bb.base), enc); err != nil {
				return 0, err
			}
		}
	}
	return delta, nil
}
