package store

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// The buffers of a last-values save, kept between saves.
//
// A save of 100,000 changed tags encodes about 4 MB of changes, sorts
// their index and writes about 4 MB of merged segments; made afresh per
// save they were most of what the daemon allocates, and every GC of the
// daemon came at a save. The DB keeps one lvScratch in a slot: a save
// swaps it out, and a save that finds the slot empty (another one runs)
// makes its own; either is put back after the transaction, the first
// one back wins.
//
// The buffers may be reused once db.update has returned. bbolt keeps the
// key and value slices given to Bucket.Put as inodes of the transaction's
// nodes (bbolt v1.5.0 node.go, node.put) and reads them only until the
// commit: Tx.Commit spills the nodes (node.go, node.spill → node.write →
// common.WriteInodeToPage), which copies every key and value into the
// transaction's own page buffers before tx.write puts those on disk, and
// a remap during the spill copies them to the heap (node.go,
// node.dereference) before anything reads them again. Then tx.close
// (tx.go) drops the nodes. On every other path DB.Update (db.go) rolls
// the transaction back before it returns, which drops them too. Keys
// are not kept at all: Bucket.Put clones its key (bucket.go, Bucket.Put),
// which is why lvSegKey can hand out slices of one shared table.

// lvChunkSize is the size of the chunks that segment records are carved
// from; a segment larger than a chunk gets its own buffer.
const lvChunkSize = 256 << 10

// lvScratchMax bounds what a scratch may hold and still be kept: one
// outsized save does not pin its buffers for the process's lifetime.
const lvScratchMax = 32 << 20

// lvScratch is one save's reusable buffers: the changes (batch), their
// order by segment, a record encoder's buffer, the chunks the segment
// records are carved from, and the records of the save in segment order
// (outs, cleared after each save: they point into the chunks or at a
// record's own buffer).
type lvScratch struct {
	batch  lvBatch
	order  []lvEnt
	rec    []byte
	chunks [][]byte
	outs   []lvOut

	// The chunks' state within one applyLastValueChanges: free is the
	// unused rest of chunks[next-1] (its length is what is left).
	free []byte
	next int
}

// lvOut is one merged segment of a save, put after every merge.
type lvOut struct {
	rec    []byte
	seg    uint16
	stored bool // the segment had a record
}

// lvScratchSlot is the DB's kept scratch.
type lvScratchSlot struct {
	p atomic.Pointer[lvScratch]
}

// take returns the kept scratch, emptied, or a new one when another
// save holds it.
func (sl *lvScratchSlot) take() *lvScratch {
	s := sl.p.Swap(nil)
	if s == nil {
		s = new(lvScratch)
	}
	s.batch.buf = s.batch.buf[:0]
	s.batch.ents = s.batch.ents[:0]
	return s
}

// give keeps s for the next save unless it grew past lvScratchMax or the
// slot holds another. Call it only after the save's transaction ended.
func (sl *lvScratchSlot) give(s *lvScratch) {
	if s.retained() > lvScratchMax {
		return
	}
	sl.p.CompareAndSwap(nil, s)
}

// retained is the number of bytes s holds.
func (s *lvScratch) retained() int {
	n := cap(s.batch.buf) + cap(s.batch.ents)*lvEntSize + cap(s.order)*lvEntSize + cap(s.rec) + cap(s.outs)*lvOutSize
	for _, c := range s.chunks {
		n += cap(c)
	}
	return n
}

// Sizes of lvEnt and lvOut, for retained.
const (
	lvEntSize = int(unsafe.Sizeof(lvEnt{}))
	lvOutSize = int(unsafe.Sizeof(lvOut{}))
)

// reserve makes room in the batch for n changes of about bytes bytes,
// with an eighth more, so that saves of a varying number of changed tags
// settle on one allocation.
func (s *lvScratch) reserve(n, bytes int) {
	if cap(s.batch.buf) < bytes {
		s.batch.buf = make([]byte, 0, bytes+bytes/8)
	}
	if cap(s.batch.ents) < n {
		s.batch.ents = make([]lvEnt, 0, n+n/8)
	}
}

// orderOf returns s.order resized to n entries.
func (s *lvScratch) orderOf(n int) []lvEnt {
	if cap(s.order) < n {
		s.order = make([]lvEnt, n, n+n/8)
	}
	s.order = s.order[:n]
	return s.order
}

// startSegments makes every chunk free again, for a new transaction: the
// records of the last one are on disk (see above).
func (s *lvScratch) startSegments() {
	s.free = nil
	s.next = 0
	s.outs = s.outs[:0]
}

// segBuf returns an empty buffer of capacity need for one segment record
// and whether it is carved from a chunk (then the record, once written,
// is taken from the chunk by carved).
func (s *lvScratch) segBuf(need int) ([]byte, bool) {
	if need > lvChunkSize {
		return make([]byte, 0, need), false
	}
	if len(s.free) < need {
		if s.next == len(s.chunks) {
			s.chunks = append(s.chunks, make([]byte, lvChunkSize))
		}
		s.free = s.chunks[s.next]
		s.next++
	}
	return s.free[:0:need], true
}

// carved takes rec, written into the buffer segBuf returned, from the
// chunk. A record that outgrew the buffer was moved by append and holds
// nothing of the chunk.
func (s *lvScratch) carved(rec []byte, need int) {
	if len(rec) <= need {
		s.free = s.free[len(rec):]
	}
}

// endSegments drops the references to this transaction's records.
func (s *lvScratch) endSegments() {
	clear(s.outs)
	s.outs = s.outs[:0]
	s.free = nil
}

// lvSegKeys holds every segment's record key: segment n's is bytes
// 2n and 2n+1. bbolt never writes to a key it is given (and Bucket.Put
// copies it), so they are shared by every transaction.
var lvSegKeys = func() *[2 * lvSegments]byte {
	var t [2 * lvSegments]byte
	for s := 0; s < lvSegments; s++ {
		binary.BigEndian.PutUint16(t[2*s:], uint16(s))
	}
	return &t
}()

// lvSegKey returns the record key of segment seg, a slice of lvSegKeys:
// callers must not write to it.
func lvSegKey(seg uint16) []byte {
	i := 2 * int(seg)
	return lvSegKeys[i : i+2 : i+2]
}
