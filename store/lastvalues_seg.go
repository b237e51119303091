package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/value"
)

// Last values on disk.
//
// The tags' last values live in the bucket "last_value_segments": the
// tags are spread over lvSegments segments by a hash of their path, and
// each segment is one bbolt record holding its tags' VQTs, sorted by path.
// A save of 100,000 changed tags is then 4,096 bbolt puts instead of
// 100,000: bbolt's cost is per key (a cursor seek, its search stack and
// the leaf's inode per put), and one record per tag made the 10 s
// last-values save of a 100,000-point plant the daemon's largest
// allocator (about 40 MB per save, 2 % of a core).
//
// A segment record is the format byte lvSegFormat, then for each tag,
// in path order: uvarint path length, the path, uvarint record length,
// the record (appendRecord: binary for a scalar, vqtRecord's JSON
// otherwise). Its key is the segment number
// as 2 big-endian bytes.
//
// Builds before segments kept one record per tag, keyed by path, in the
// bucket "last_values". That bucket stays (an earlier build, after a
// firmware rollback, still finds it and writes there); Open moves what
// it holds into the segments (the newer VQT of a tag wins) and empties
// it, and LoadLastValues of a read-only store reads both.

// lvSegments is the number of segments. It is part of the file format:
// a path's segment is fnv-1a(path) mod lvSegments.
const lvSegments = 4096

// lvSegFormat is the first byte of every segment record.
const lvSegFormat = 1

// bucketLastValueSegs holds the segments; created on the first save.
var bucketLastValueSegs = []byte("last_value_segments")

// errBadSegment wraps every fault of a segment record's layout.
var errBadSegment = errors.New("malformed last-value segment")

// lvSegment is path's segment number.
func lvSegment(path string) uint16 {
	h := uint32(2166136261) // FNV-1a, 32 bits
	for i := 0; i < len(path); i++ {
		h ^= uint32(path[i])
		h *= 16777619
	}
	return uint16(h % lvSegments)
}

// segReader walks a segment record's entries in order.
type segReader struct {
	b []byte
}

// newSegReader checks seg's format byte; a nil or empty seg has no entries.
func newSegReader(seg []byte) (segReader, error) {
	if len(seg) == 0 {
		return segReader{}, nil
	}
	if seg[0] != lvSegFormat {
		return segReader{}, fmt.Errorf("%w: format %d, want %d", errBadSegment, seg[0], lvSegFormat)
	}
	return segReader{b: seg[1:]}, nil
}

// next returns the next entry, ok false at the end. The path is a string
// view of the segment's bytes only until the caller converts it: pathBytes
// aliases the record, so callers that keep a path copy it.
func (r *segReader) next() (pathBytes, rec []byte, ok bool, err error) {
	if len(r.b) == 0 {
		return nil, nil, false, nil
	}
	pathBytes, rest, err := segField(r.b)
	if err != nil {
		return nil, nil, false, fmt.Errorf("path: %w", err)
	}
	rec, rest, err = segField(rest)
	if err != nil {
		return nil, nil, false, fmt.Errorf("tag %q: record: %w", pathBytes, err)
	}
	r.b = rest
	return pathBytes, rec, true, nil
}

// segField reads one uvarint-length-prefixed field off b.
func segField(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: bad length", errBadSegment)
	}
	end := k + int(n)
	return b[k:end:end], b[end:], nil
}

// appendSegEntry appends one entry (path, then rec) to out.
func appendSegEntry(out []byte, path string, rec []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(path)))
	out = append(out, path...)
	out = binary.AppendUvarint(out, uint64(len(rec)))
	return append(out, rec...)
}

// lvBatch is one save's changes to the segments, sorted by path and
// unique: each change is an entry in appendSegEntry's layout, laid one
// after another in buf in path order (the order the caller holds its
// values in, so that encoding reads them in memory order), and indexed
// by ents. A segment's merge then reads each change as one entry of buf,
// path and record together: one cache miss per change where a path
// string, a record and an index each were one (100,000 tags hash to
// random segments).
type lvBatch struct {
	buf  []byte
	ents []lvEnt
}

// lvEnt is one change of an lvBatch: the entry buf[off:end] of segment
// seg; del: remove the entry's path (its record is empty).
type lvEnt struct {
	off, end int32
	seg      uint16
	del      bool
}

// add appends the change of path: put rec, or, when del, remove it.
func (b *lvBatch) add(path string, rec []byte, del bool) {
	off := len(b.buf)
	b.buf = appendSegEntry(b.buf, path, rec)
	b.ents = append(b.ents, lvEnt{off: int32(off), end: int32(len(b.buf)), seg: lvSegment(path), del: del})
}

// entry returns the path and whole entry of e.
func (b *lvBatch) entry(e lvEnt) (path, ent []byte) {
	ent = b.buf[e.off:e.end:e.end]
	path, _, _ = segField(ent) // written by add: cannot fail
	return path, ent
}

// lvWriter merges last-value changes into the segments of one write
// transaction.
type lvWriter struct {
	logger *slog.Logger
	batch  *lvBatch
}

// mergeSegment merges the changes ents (sorted by path, unique, all of
// segment seg) into cur, the stored record of seg (nil: none), and
// returns the record to put, into buf. A stored record that cannot be
// read is replaced by the changes alone, with a warning: one damaged
// record must not stop the saves of every tag that hashes to it.
func (w *lvWriter) mergeSegment(buf, cur []byte, seg uint16, ents []lvEnt) []byte {
	out, err := w.merge(buf, cur, ents)
	if err != nil {
		w.logger.Warn("last-value segment unreadable, replaced by this save's values", slog.Int("segment", int(seg)), slog.Any("err", err))
		out, _ = w.merge(out[:0], nil, ents) // no stored entries: no read error
	}
	return out
}

// merge appends the segment made of cur's entries and the changes ents
// to out. Stored entries that stay are copied as they are, each run
// between two changes in one copy; every one is still read, so a
// damaged record fails the merge.
func (w *lvWriter) merge(out, cur []byte, ents []lvEnt) ([]byte, error) {
	r, err := newSegReader(cur)
	if err != nil {
		return out, err
	}
	out = append(out, lvSegFormat)
	// pend: the stored entries not yet copied or dropped; head: those
	// from pathB's on (pend's bytes before head's are the run to copy).
	pend, head := r.b, r.b
	pathB, _, ok, err := r.next()
	if err != nil {
		return out, err
	}
	for _, e := range ents {
		path, ent := w.batch.entry(e)
		c := -1
		for ok {
			if c = bytes.Compare(pathB, path); c >= 0 {
				break
			}
			head = r.b
			if pathB, _, ok, err = r.next(); err != nil {
				return out, err
			}
		}
		out = append(out, pend[:len(pend)-len(head)]...)
		pend = head
		if ok && c == 0 { // the change replaces or removes pathB's entry
			pend, head = r.b, r.b
			if pathB, _, ok, err = r.next(); err != nil {
				return out, err
			}
		}
		if !e.del {
			out = append(out, ent...)
		}
	}
	for ok {
		if _, _, ok, err = r.next(); err != nil {
			return out, err
		}
	}
	return append(out, pend...), nil
}

// readSegments calls fn with every entry of every segment of tx. A
// segment that cannot be read fails the walk naming the segment.
func readSegments(tx *bolt.Tx, fn func(path, rec []byte) error) error {
	b := tx.Bucket(bucketLastValueSegs)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		r, err := newSegReader(v)
		if err != nil {
			return fmt.Errorf("segment %x: %w", k, err)
		}
		for {
			p, rec, ok, err := r.next()
			if err != nil {
				return fmt.Errorf("segment %x: %w", k, err)
			}
			if !ok {
				return nil
			}
			if err := fn(p, rec); err != nil {
				return err
			}
		}
	})
}

// applyLastValueChanges writes the changes of s.batch (sorted by path,
// unique) into the segments of tx, in segment order. It carves the
// records from s's chunks, which tx then holds until it ends: call it at
// most once per transaction and scratch.
func (db *DB) applyLastValueChanges(tx *bolt.Tx, s *lvScratch) error {
	segs, err := tx.CreateBucketIfNotExists(bucketLastValueSegs)
	if err != nil {
		return fmt.Errorf("bucket %q: %w", bucketLastValueSegs, err)
	}
	b := &s.batch
	// Group by segment, keeping path order within each (a counting sort).
	var counts [lvSegments + 1]int32
	for _, e := range b.ents {
		counts[e.seg+1]++
	}
	for i := 1; i <= lvSegments; i++ {
		counts[i] += counts[i-1]
	}
	order := s.orderOf(len(b.ents))
	next := counts
	for _, e := range b.ents {
		order[next[e.seg]] = e
		next[e.seg]++
	}
	// Merge every changed segment first, reading the stored records with
	// one cursor (a Get per segment would build a cursor each), then put
	// them: a put would invalidate the cursor.
	s.startSegments()
	defer s.endSegments()
	w := lvWriter{logger: db.logger, batch: b}
	c := segs.Cursor()
	for i := 0; i < lvSegments; i++ {
		lo, hi := counts[i], counts[i+1]
		if lo == hi {
			continue
		}
		seg := uint16(i)
		key := lvSegKey(seg)
		var cur []byte
		if k, v := c.Seek(key); bytes.Equal(k, key) {
			cur = v
		}
		ents := order[lo:hi]
		need := len(cur) + 1
		for _, e := range ents {
			need += int(e.end - e.off)
		}
		buf, carved := s.segBuf(need)
		rec := w.mergeSegment(buf, cur, seg, ents)
		if carved {
			s.carved(rec, need)
		}
		if cur != nil && bytes.Equal(rec, cur) {
			continue // every change restates the stored VQT
		}
		s.outs = append(s.outs, lvOut{rec: rec, seg: seg, stored: cur != nil})
	}
	for _, o := range s.outs {
		if err := putSegment(segs, o); err != nil {
			return fmt.Errorf("segment %d: %w", o.seg, err)
		}
	}
	return nil
}

// putSegment stores o, or deletes its segment's record when no tag is
// left in it.
func putSegment(segs *bolt.Bucket, o lvOut) error {
	if len(o.rec) == 1 { // the format byte alone: no tag left
		if !o.stored {
			return nil
		}
		return segs.Delete(lvSegKey(o.seg))
	}
	return segs.Put(lvSegKey(o.seg), o.rec)
}

// moveLegacyLastValues moves the per-tag records of bucketLastValues
// (written by builds before segments) into the segments, where the
// segment has no newer VQT for the tag, and empties the bucket. A record
// that cannot be decoded is dropped with a warning. It is a no-op, one
// read transaction, when the bucket is empty.
func (db *DB) moveLegacyLastValues() error {
	var n int
	if err := db.view(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketLastValues); b != nil {
			if k, _ := b.Cursor().First(); k != nil {
				n = 1
			}
		}
		return nil
	}); err != nil || n == 0 {
		return err
	}
	var moved, dropped int
	s := db.lvScratch.take()
	err := db.update(func(tx *bolt.Tx) error {
		legacy, err := bucket(tx, bucketLastValues)
		if err != nil {
			return err
		}
		newer := map[string]value.VQT{}
		if err := readSegments(tx, func(p, rec []byte) error {
			if vqt, err := decodeRecord(rec); err == nil {
				newer[string(p)] = vqt
			}
			return nil
		}); err != nil {
			db.logger.Warn("last-value segments unreadable while moving older records", slog.Any("err", err))
		}
		changes := &s.batch
		if err := legacy.ForEach(func(k, v []byte) error {
			vqt, err := decodeVQT(v)
			if err != nil {
				dropped++
				db.logger.Warn("stored last value unreadable, dropped", slog.String("tag", string(k)), slog.Any("err", err))
				return nil
			}
			if have, ok := newer[string(k)]; ok && !vqt.Time.After(have.Time) {
				return nil
			}
			rec, err := appendRecord(s.rec[:0], vqt)
			if err != nil {
				dropped++
				db.logger.Warn("stored last value cannot be stored again, dropped", slog.String("tag", string(k)), slog.Any("err", err))
				return nil
			}
			s.rec = rec
			changes.add(string(k), rec, false)
			return nil
		}); err != nil {
			return err
		}
		if err := db.applyLastValueChanges(tx, s); err != nil { // ForEach walks in key order: sorted
			return err
		}
		moved = len(changes.ents)
		if err := tx.DeleteBucket(bucketLastValues); err != nil {
			return err
		}
		_, err = tx.CreateBucket(bucketLastValues)
		return err
	})
	db.lvScratch.give(s)
	if err != nil {
		return fmt.Errorf("store: move last values into segments: %w", err)
	}
	db.logger.Info("last values moved into segments", slog.Int("moved", moved), slog.Int("dropped", dropped))
	return nil
}
