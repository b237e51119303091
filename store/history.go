package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/value"
)

// History buckets: all under "hist", created by the first write (so files
// of schema version 1 take them without a migration).
//
//	hist/tags     tag path → 4-byte id
//	hist/ids      4-byte id → tag path
//	hist/journal  8-byte commit sequence → samples of one group commit
//	hist/data/<id> timeKey(first sample) → block (histblock.go)
//	hist/meta     "bytes" → 8-byte size of every block (for retention)
var (
	bucketHist  = []byte("hist")
	histTags    = []byte("tags")
	histIDs     = []byte("ids")
	histJournal = []byte("journal")
	histData    = []byte("data")
	histMeta    = []byte("meta")
	keyBytes    = []byte("bytes")
)

// HistoryPolicy is one tag's recording policy (project file, tag
// "history: {enabled, deadband, max_interval}"): a change is recorded when
// its quality differs from the last recorded one, or its value differs by
// more than Deadband (numbers; any difference for other values); with
// MaxInterval > 0 the current value is recorded again, stamped now, when
// nothing was recorded for that long.
type HistoryPolicy struct {
	Deadband    float64
	MaxInterval time.Duration
}

// HistoryOptions configures OpenHistory. Zero fields take
// DefaultHistoryOptions; MaxAge and MaxBytes zero mean no limit.
type HistoryOptions struct {
	// Queue is how many samples may wait for their group commit; samples
	// offered beyond it are dropped and counted (Stats.Dropped, Alarms).
	Queue int
	// CommitEvery is the group-commit period: samples offered meanwhile are
	// committed together, in one transaction (PERFORMANCE.md B9).
	CommitEvery time.Duration
	// CheckpointEvery and CheckpointSamples say when the journal is folded
	// into per-tag blocks: after that long, or once that many samples are
	// in the journal.
	CheckpointEvery   time.Duration
	CheckpointSamples int
	// MaxAge and MaxBytes are the retention (config history.retention):
	// blocks whose newest sample is older than MaxAge are deleted, then the
	// oldest blocks until the blocks take at most MaxBytes.
	MaxAge   time.Duration
	MaxBytes int64
	// RetentionEvery is how often retention runs (and once at start).
	RetentionEvery time.Duration
	// Logger receives failures; nil discards.
	Logger *slog.Logger

	now               func() time.Time // tests
	retentionHook     func() error     // tests: fails a retention run
	noCloseCheckpoint bool             // tests: stop like a crash, journal kept
}

// DefaultHistoryOptions: a queue of 262,144 samples, group commits every
// 250 ms (bbolt fsyncs twice per commit, data then meta: 8 fsyncs/s, under
// PERFORMANCE.md B9's 10), checkpoints every minute or 1,000,000 samples
// (about 16 MB of journal), retention every 10 minutes.
var DefaultHistoryOptions = HistoryOptions{
	Queue: 262144, CommitEvery: 250 * time.Millisecond,
	CheckpointEvery: time.Minute, CheckpointSamples: 1000000,
	RetentionEvery: 10 * time.Minute,
}

// Sample is one recorded value of a tag: its source time (UTC), value and
// quality.
type Sample struct {
	Time    time.Time
	Value   value.Value
	Quality value.Quality
}

// HistoryStats are a History's counters since OpenHistory, for health and
// metrics.
type HistoryStats struct {
	Offered            uint64 // samples offered (Offer and Record)
	Skipped            uint64 // changes inside the deadband, not recorded
	Dropped            uint64 // samples refused because the queue was full
	Rejected           uint64 // samples whose value cannot be stored
	Committed          uint64 // samples committed
	Commits            uint64 // group commits
	CommitFailures     uint64
	LastCommitError    error
	Checkpoints        uint64
	CheckpointFailures uint64
	RetentionRuns      uint64
	RetentionFailures  uint64
	LastRetentionError error
	RetentionDeleted   uint64 // blocks deleted by retention
	Bytes              int64  // bytes of blocks (what MaxBytes bounds)
	Journal            int    // committed samples not yet in blocks
}

// History records tag history (DESIGN.md, store: history; issue 4
// system.hist). Offer never blocks: samples wait in a bounded queue and one
// writer goroutine group-commits them every CommitEvery into a journal (one
// transaction, one fsync pair, per commit), and folds the journal into
// per-tag blocks at checkpoints. Queries merge blocks and the journal.
// Safe for concurrent use. Close it before the DB.
type History struct {
	db   *DB
	opts HistoryOptions
	log  *slog.Logger

	inMu       sync.Mutex // guards the intake fields
	in         []qsample
	spare      []qsample
	backlog    int // samples the writer holds uncommitted after a failure
	closed     bool
	policies   map[string]*policyState
	offered    uint64
	skipped    uint64
	dropped    uint64
	lastDrop   time.Time
	warnedFull bool

	mu      sync.RWMutex // guards ids, paths, open, openN and the counters below
	ids     map[string]uint32
	paths   map[uint32]string
	open    map[uint32]*openSeries
	openN   int
	bytes   int64
	st      HistoryStats // Committed ... RetentionDeleted
	retErr  error
	retFrom time.Time // first failure of the current failing streak

	ckMu sync.RWMutex // held by checkpoints (write) and queries (read)

	// Writer-owned.
	nextID         uint32
	pending        []qsample
	lastCheckpoint time.Time
	lastRetention  time.Time
	lastMaxScan    time.Time

	reqs chan *histReq
	stop chan struct{}
	done chan struct{}
}

type qsample struct {
	path string
	s    sample
}

type policyState struct {
	p         HistoryPolicy
	hasRec    bool
	rec       sample
	hasLatest bool
	latest    sample
}

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

type histReq struct {
	fn   func() error
	err  error
	done chan struct{}
}

// OpenHistory opens the history in db: it loads the tag ids, replays the
// journal of the last run (samples committed but not yet folded into
// blocks), and starts the writer.
func OpenHistory(db *DB, opts HistoryOptions) (*History, error) {
	d := DefaultHistoryOptions
	if opts.Queue <= 0 {
		opts.Queue = d.Queue
	}
	if opts.CommitEvery <= 0 {
		opts.CommitEvery = d.CommitEvery
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = d.CheckpointEvery
	}
	if opts.CheckpointSamples <= 0 {
		opts.CheckpointSamples = d.CheckpointSamples
	}
	if opts.RetentionEvery <= 0 {
		opts.RetentionEvery = d.RetentionEvery
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &History{
		db: db, opts: opts, log: log,
		policies: map[string]*policyState{},
		ids:      map[string]uint32{}, paths: map[uint32]string{}, open: map[uint32]*openSeries{},
		reqs: make(chan *histReq), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := h.load(); err != nil {
		return nil, fmt.Errorf("store: open history: %w", err)
	}
	h.lastCheckpoint = opts.now()
	go h.run()
	return h, nil
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
		if m <= 0 || len(rec) < n+m+1 {
			return errBlockCorrupt
		}
		q := value.Quality(rec[n+m])
		v, k, err := readHistValue(rec[n+m+1:])
		if err != nil {
			return err
		}
		rec = rec[n+m+1+k:]
		if err := h.openFor(uint32(id)).add(sample{t: t, q: q, v: v}); err != nil {
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

// SetPolicies replaces the recording policies: only the tags named are
// recorded by Offer. A tag that keeps its policy keeps its deadband state.
func (h *History) SetPolicies(p map[string]HistoryPolicy) {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	next := make(map[string]*policyState, len(p))
	for path, pol := range p {
		ps := h.policies[path]
		if ps == nil {
			ps = &policyState{}
		}
		ps.p = pol
		next[path] = ps
	}
	h.policies = next
}

// Offer is the tag engine's change feed: it records v for path when path
// has a policy (SetPolicies) and v passes it, without blocking. v.Time is
// the source timestamp (now when zero). A sample the queue cannot take is
// dropped and counted (DESIGN.md: events are never dropped silently).
func (h *History) Offer(path string, v value.VQT) {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	ps := h.policies[path]
	if ps == nil || h.closed {
		return
	}
	t := v.Time
	if t.IsZero() {
		t = h.opts.now()
	}
	s := sample{t: t.UnixNano(), q: v.Quality, v: v.Value}
	ps.latest, ps.hasLatest = s, true
	h.offered++
	if ps.hasRec && !ps.p.passes(ps.rec, s) {
		h.skipped++
		return
	}
	if h.enqueueLocked(path, s) {
		ps.rec, ps.hasRec = s, true
	}
}

// passes reports whether s differs enough from the last recorded r.
func (p HistoryPolicy) passes(r, s sample) bool {
	if r.q != s.q {
		return true
	}
	a, aok := value.ToFloat(r.v)
	b, bok := value.ToFloat(s.v)
	if aok && bok {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.IsNaN(a) != math.IsNaN(b)
		}
		if p.Deadband > 0 {
			return math.Abs(a-b) > p.Deadband
		}
		return a != b
	}
	return !value.Equal(r.v, s.v)
}

// Record queues s for path without any policy (direct writes) and reports
// whether the queue took it; a refused sample is counted as dropped.
func (h *History) Record(path string, s Sample) bool {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if h.closed {
		return false
	}
	h.offered++
	t := s.Time
	if t.IsZero() {
		t = h.opts.now()
	}
	return h.enqueueLocked(path, sample{t: t.UnixNano(), q: s.Quality, v: s.Value})
}

func (h *History) enqueueLocked(path string, s sample) bool {
	if len(h.in)+h.backlog >= h.opts.Queue {
		h.dropped++
		h.lastDrop = h.opts.now()
		if !h.warnedFull {
			h.warnedFull = true
			h.log.Warn("history queue full; samples dropped and counted", slog.Int("queue", h.opts.Queue))
		}
		return false
	}
	h.in = append(h.in, qsample{path: path, s: s})
	return true
}

// run is the writer.
func (h *History) run() {
	defer close(h.done)
	tick := time.NewTicker(h.opts.CommitEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			h.tick(false)
		case r := <-h.reqs:
			r.err = r.fn()
			close(r.done)
		case <-h.stop:
			h.tick(true)
			if h.openN > 0 && !h.opts.noCloseCheckpoint {
				if err := h.checkpoint(); err != nil {
					h.log.Error("history checkpoint at close failed; the journal keeps the samples", slog.Any("err", err))
				}
			}
			return
		}
	}
}

// do runs fn in the writer goroutine and returns its error.
func (h *History) do(ctx context.Context, fn func() error) error {
	r := &histReq{fn: fn, done: make(chan struct{})}
	select {
	case h.reqs <- r:
	case <-h.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tick commits what was offered, forces max-interval samples, and runs a
// due checkpoint or retention. It returns the commit's error.
func (h *History) tick(final bool) error {
	now := h.opts.now()
	if now.Sub(h.lastMaxScan) >= time.Second || final {
		h.lastMaxScan = now
		h.forceMaxInterval(now)
	}
	h.inMu.Lock()
	batch := h.in
	h.in, h.spare = h.spare[:0], nil
	h.inMu.Unlock()
	h.pending = append(h.pending, batch...)
	if cap(batch) <= 4*h.opts.Queue {
		h.spare = batch[:0]
	}
	var err error
	if len(h.pending) > 0 {
		err = h.commit()
	}
	h.inMu.Lock()
	h.backlog = len(h.pending)
	h.inMu.Unlock()
	if final {
		return err
	}
	if h.openN >= h.opts.CheckpointSamples || (h.openN > 0 && now.Sub(h.lastCheckpoint) >= h.opts.CheckpointEvery) {
		if cerr := h.checkpoint(); cerr != nil {
			h.log.Error("history checkpoint failed; retrying later", slog.Any("err", cerr))
		}
		h.lastCheckpoint = now
	}
	if (h.opts.MaxAge > 0 || h.opts.MaxBytes > 0) && now.Sub(h.lastRetention) >= h.opts.RetentionEvery {
		h.lastRetention = now
		h.runRetention(now)
	}
	return err
}

// forceMaxInterval records the latest value of every tag with a
// MaxInterval that recorded nothing for that long, stamped now.
func (h *History) forceMaxInterval(now time.Time) {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	ns := now.UnixNano()
	for path, ps := range h.policies {
		if ps.p.MaxInterval <= 0 || !ps.hasLatest || h.closed {
			continue
		}
		if ps.hasRec && ns-ps.rec.t < int64(ps.p.MaxInterval) {
			continue
		}
		s := ps.latest
		s.t = ns
		if h.enqueueLocked(path, s) {
			ps.rec, ps.hasRec = s, true
		}
	}
}

// commit writes h.pending as one journal record in one transaction.
func (h *History) commit() error {
	type newTag struct {
		path string
		id   uint32
	}
	var added []newTag
	next := h.nextID
	rec := make([]byte, 0, len(h.pending)*16)
	ids := make([]uint32, 0, len(h.pending))
	kept := h.pending[:0]
	var rejected uint64
	for _, q := range h.pending {
		id, ok := h.ids[q.path]
		if !ok {
			for _, a := range added {
				if a.path == q.path {
					id, ok = a.id, true
					break
				}
			}
		}
		if !ok {
			if len(q.path) == 0 || len(q.path) > bolt.MaxKeySize {
				rejected++
				continue
			}
			next++
			id = next
			added = append(added, newTag{q.path, id})
		}
		start := len(rec)
		rec = binary.AppendUvarint(rec, uint64(id))
		rec = binary.AppendVarint(rec, q.s.t)
		rec = append(rec, byte(q.s.q))
		var err error
		if rec, err = appendHistValue(rec, q.s.v); err != nil {
			rec = rec[:start]
			rejected++
			h.log.Warn("history sample not recordable", slog.String("tag", q.path), slog.Any("err", err))
			continue
		}
		kept = append(kept, q)
		ids = append(ids, id)
	}
	h.pending = kept
	err := h.db.update(func(tx *bolt.Tx) error {
		hist, err := tx.CreateBucketIfNotExists(bucketHist)
		if err != nil {
			return err
		}
		tags, err := hist.CreateBucketIfNotExists(histTags)
		if err != nil {
			return err
		}
		idb, err := hist.CreateBucketIfNotExists(histIDs)
		if err != nil {
			return err
		}
		j, err := hist.CreateBucketIfNotExists(histJournal)
		if err != nil {
			return err
		}
		for _, a := range added {
			var k [4]byte
			binary.BigEndian.PutUint32(k[:], a.id)
			if err := tags.Put([]byte(a.path), k[:]); err != nil {
				return err
			}
			if err := idb.Put(k[:], []byte(a.path)); err != nil {
				return err
			}
		}
		if len(added) > 0 {
			if err := tags.SetSequence(uint64(next)); err != nil {
				return err
			}
		}
		if len(rec) == 0 {
			return nil
		}
		seq, err := j.NextSequence()
		if err != nil {
			return err
		}
		j.FillPercent = 1
		return j.Put(u64Key(seq), rec)
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Rejected += rejected
	if err != nil {
		h.st.CommitFailures++
		h.st.LastCommitError = err
		h.log.Error("history commit failed; retrying", slog.Int("samples", len(h.pending)), slog.Any("err", err))
		return fmt.Errorf("store: history commit: %w", err)
	}
	h.nextID = next
	for _, a := range added {
		h.ids[a.path] = a.id
		h.paths[a.id] = a.path
	}
	for i, q := range h.pending {
		if err := h.openFor(ids[i]).add(q.s); err != nil {
			h.log.Error("history journal sample unusable", slog.String("tag", q.path), slog.Any("err", err))
		}
	}
	h.openN += len(h.pending)
	h.st.Committed += uint64(len(h.pending))
	h.st.Commits++
	h.st.LastCommitError = nil
	h.pending = h.pending[:0]
	return nil
}

// Flush commits every sample offered before the call now, without waiting
// for the commit period, and returns the commit's error.
func (h *History) Flush(ctx context.Context) error {
	return h.do(ctx, func() error { return h.tick(true) })
}

// Checkpoint folds the journal into per-tag blocks now.
func (h *History) Checkpoint(ctx context.Context) error {
	return h.do(ctx, func() error {
		if err := h.tick(true); err != nil {
			return err
		}
		h.lastCheckpoint = h.opts.now()
		return h.checkpoint()
	})
}

// Close stops taking samples, commits the queued ones, folds the journal
// into blocks and stops the writer (or gives up when ctx ends; the journal
// keeps what was committed).
func (h *History) Close(ctx context.Context) error {
	h.inMu.Lock()
	if h.closed {
		h.inMu.Unlock()
		return nil
	}
	h.closed = true
	h.inMu.Unlock()
	close(h.stop)
	select {
	case <-h.done:
	case <-ctx.Done():
		return fmt.Errorf("store: history close: %w", ctx.Err())
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if n := len(h.pending); n > 0 {
		return fmt.Errorf("store: history close: %d samples not committed: %v", n, h.st.LastCommitError)
	}
	return nil
}

// Stats returns the counters.
func (h *History) Stats() HistoryStats {
	h.mu.RLock()
	s := h.st
	s.Bytes, s.Journal = h.bytes, h.openN
	h.mu.RUnlock()
	h.inMu.Lock()
	s.Offered, s.Skipped, s.Dropped = h.offered, h.skipped, h.dropped
	h.inMu.Unlock()
	return s
}

// dropAlarmFor is how long a queue overflow stays in Alarms.
const dropAlarmFor = 10 * time.Minute

// Alarms returns what health must show about history, one reason each: a
// failing retention job (DESIGN.md field case C24: a retention job that
// fails raises an alarm), failing commits, and queue overflows in the last
// 10 minutes. Empty when all is well.
func (h *History) Alarms() []string {
	var out []string
	h.mu.RLock()
	if h.retErr != nil {
		out = append(out, fmt.Sprintf("history retention failing since %s: %v", h.retFrom.UTC().Format(time.RFC3339), h.retErr))
	}
	if h.st.LastCommitError != nil {
		out = append(out, fmt.Sprintf("history cannot commit: %v", h.st.LastCommitError))
	}
	h.mu.RUnlock()
	h.inMu.Lock()
	if h.dropped > 0 && h.opts.now().Sub(h.lastDrop) < dropAlarmFor {
		out = append(out, fmt.Sprintf("history queue overflowed: %d samples dropped in total, the last at %s",
			h.dropped, h.lastDrop.UTC().Format(time.RFC3339)))
	}
	h.inMu.Unlock()
	return out
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
// most (short transactions, field case C24).
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

// Aggregate names a getTrends aggregate (DESIGN.md, system.hist.getTrends).
type Aggregate string

// The aggregates of getTrends.
const (
	AggRaw   Aggregate = "raw"
	AggAvg   Aggregate = "avg" // time-weighted: each value holds until the next sample
	AggMin   Aggregate = "min"
	AggMax   Aggregate = "max"
	AggFirst Aggregate = "first"
	AggLast  Aggregate = "last"
	AggCount Aggregate = "count"
)

// ParseAggregate returns the aggregate named s; the error names s and the
// valid names (wrapping ErrInvalid).
func ParseAggregate(s string) (Aggregate, error) {
	switch a := Aggregate(s); a {
	case AggRaw, AggAvg, AggMin, AggMax, AggFirst, AggLast, AggCount:
		return a, nil
	}
	return "", fmt.Errorf("unknown aggregate %q (want raw, avg, min, max, first, last or count): %w", s, ErrInvalid)
}

// Query limits.
const (
	// MaxTrendIntervals is the most intervals one path may be split into.
	MaxTrendIntervals = 100000
	// MaxTrendPoints is the most raw points one query returns.
	MaxTrendPoints = 2000000
)

// TrendQuery is one getTrends call: the paths, the range [Start, End]
// (End zero: now), the interval (required unless Aggregate is raw) and the
// aggregate.
type TrendQuery struct {
	Paths     []string
	Start     time.Time
	End       time.Time
	Interval  time.Duration
	Aggregate Aggregate
}

// TrendPoint is one point of a trend: a raw sample, or one interval's
// aggregate stamped with the interval's start. Quality is the sample's, or
// for an aggregate Good when no bad-quality sample was excluded from the
// interval and Uncertain when some were.
type TrendPoint struct {
	Time    time.Time
	Value   value.Value
	Quality value.Quality
}

// Trend is one path's answer. Bad counts the bad-quality samples in the
// range (excluded from aggregates; raw trends include them with their
// quality). Known is false for a path that never recorded anything.
type Trend struct {
	Path      string
	Aggregate Aggregate
	Interval  time.Duration
	Points    []TrendPoint
	Bad       int
	Known     bool
}

// Query answers a getTrends call: for each path, in order, its raw samples
// in [Start, End] or one point per interval of Interval from Start (count
// gives every interval; the others only intervals with data). Aggregates
// use Good and Uncertain samples only. A range over MaxTrendIntervals
// intervals or MaxTrendPoints raw points wraps ErrInvalid.
func (h *History) Query(ctx context.Context, q TrendQuery) ([]Trend, error) {
	if q.Aggregate == "" {
		q.Aggregate = AggRaw
	}
	if _, err := ParseAggregate(string(q.Aggregate)); err != nil {
		return nil, fmt.Errorf("store: history query: %w", err)
	}
	now := h.opts.now()
	if q.End.IsZero() {
		q.End = now
	}
	if q.Start.IsZero() || q.End.Before(q.Start) {
		return nil, fmt.Errorf("store: history query: start %s must be set and not after end %s: %w",
			q.Start.UTC().Format(time.RFC3339Nano), q.End.UTC().Format(time.RFC3339Nano), ErrInvalid)
	}
	start, end := q.Start.UnixNano(), q.End.UnixNano()
	if q.Aggregate != AggRaw {
		if q.Interval <= 0 {
			return nil, fmt.Errorf("store: history query: aggregate %q needs an interval: %w", q.Aggregate, ErrInvalid)
		}
		if n := (end - start) / int64(q.Interval); n >= MaxTrendIntervals {
			return nil, fmt.Errorf("store: history query: %d intervals of %s per path is over %d; widen the interval: %w",
				n+1, q.Interval, MaxTrendIntervals, ErrInvalid)
		}
	}
	out := make([]Trend, 0, len(q.Paths))
	points := 0
	for _, p := range q.Paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ss, before, known, err := h.readRange(p, start, end)
		if err != nil {
			return nil, fmt.Errorf("store: history of %q: %w", p, err)
		}
		tr := Trend{Path: p, Aggregate: q.Aggregate, Interval: q.Interval, Known: known}
		if q.Aggregate == AggRaw {
			if points += len(ss); points > MaxTrendPoints {
				return nil, fmt.Errorf("store: history query: more than %d raw points; narrow the range or use an aggregate: %w",
					MaxTrendPoints, ErrInvalid)
			}
			tr.Points = make([]TrendPoint, len(ss))
			for i, s := range ss {
				tr.Points[i] = TrendPoint{Time: nsTime(s.t), Value: s.v, Quality: s.q}
				if s.q.IsBad() {
					tr.Bad++
				}
			}
		} else {
			tr.Points, tr.Bad = aggregate(ss, before, start, end, int64(q.Interval), q.Aggregate, now.UnixNano())
		}
		out = append(out, tr)
	}
	return out, nil
}

// readRange returns path's samples in [start, end] in time order, the last
// sample before start (for time weighting), and whether the path is known.
func (h *History) readRange(path string, start, end int64) ([]sample, *sample, bool, error) {
	h.ckMu.RLock()
	defer h.ckMu.RUnlock()
	h.mu.RLock()
	id, known := h.ids[path]
	var open []sample
	var before *sample
	keep := func(s sample) bool {
		switch {
		case s.t < start:
			if before == nil || s.t >= before.t {
				c := s
				before = &c
			}
		case s.t <= end:
			open = append(open, s)
		}
		return true
	}
	var err error
	if se := h.open[id]; known && se != nil {
		err = se.each(keep)
	}
	h.mu.RUnlock()
	if err != nil || !known {
		return nil, nil, known, err
	}
	var ss []sample
	err = h.db.view(func(tx *bolt.Tx) error {
		data, _ := histDataBucket(tx)
		if data == nil {
			return nil
		}
		tb := data.Bucket(u32Key(id))
		if tb == nil {
			return nil
		}
		c := tb.Cursor()
		// The block before the first at or after start may hold samples
		// in range, and holds the sample before start.
		k, v := c.Seek(timeKey(start))
		var pk, pv []byte
		if k == nil {
			pk, pv = c.Last()
		} else {
			pk, pv = c.Prev()
		}
		if pk != nil {
			k, v = pk, pv
		} else {
			k, v = c.First()
		}
		for ; k != nil && keyTime(k) <= end; k, v = c.Next() {
			err := decodeBlock(v, func(s sample) bool {
				switch {
				case s.t < start:
					if before == nil || s.t >= before.t {
						c := s
						before = &c
					}
				case s.t <= end:
					ss = append(ss, s)
				}
				return true
			})
			if err != nil {
				return fmt.Errorf("block %x: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, known, err
	}
	if len(open) > 0 {
		merged := len(ss) > 0 && open[0].t < ss[len(ss)-1].t
		ss = append(ss, open...)
		if merged || !sortedSamples(open) {
			sortSamples(ss)
		}
	}
	return ss, before, known, nil
}

func sortedSamples(ss []sample) bool {
	for i := 1; i < len(ss); i++ {
		if ss[i].t < ss[i-1].t {
			return false
		}
	}
	return true
}

// aggregate computes one point per interval [a, a+iv) from start; samples
// are sorted and inside [start, end]; before is the last sample before
// start. Values hold until the next sample (for avg) and at most until
// min(end, now). It returns the points and the number of bad samples.
func aggregate(ss []sample, before *sample, start, end, iv int64, agg Aggregate, now int64) ([]TrendPoint, int) {
	var out []TrendPoint
	bad := 0
	holdEnd := min(end, now)
	// held is the value in effect (avg): numeric and not bad.
	var held float64
	hasHeld := false
	heldBad := false
	if before != nil {
		held, hasHeld = value.ToFloat(before.v)
		hasHeld = hasHeld && !before.q.IsBad()
		heldBad = before.q.IsBad()
	}
	i := 0
	for a := start; a <= end; a += iv {
		b := a + iv
		var (
			n           int
			nbad        int
			mn, mx      float64
			hasNum      bool
			first, last *sample
			wsum, wtot  float64
			cur         = a
			uncertain   = heldBad
		)
		for ; i < len(ss) && ss[i].t < b; i++ {
			s := &ss[i]
			if agg == AggAvg && hasHeld {
				if d := min(s.t, holdEnd) - cur; d > 0 {
					wsum += held * float64(d)
					wtot += float64(d)
				}
			}
			cur = max(cur, s.t)
			if s.q.IsBad() {
				nbad++
				hasHeld, heldBad = false, true
				uncertain = true
				continue
			}
			heldBad = false
			if s.q.IsUncertain() {
				uncertain = true
			}
			n++
			if first == nil {
				first = s
			}
			last = s
			if f, ok := value.ToFloat(s.v); ok {
				if !hasNum {
					mn, mx, hasNum = f, f, true
				}
				mn, mx = min(mn, f), max(mx, f)
				held, hasHeld = f, true
			} else {
				hasHeld = false
			}
		}
		bad += nbad
		q := value.Good
		if uncertain {
			q = value.Uncertain
		}
		t := nsTime(a)
		switch agg {
		case AggCount:
			out = append(out, TrendPoint{Time: t, Value: int64(n), Quality: q})
		case AggMin:
			if hasNum {
				out = append(out, TrendPoint{Time: t, Value: mn, Quality: q})
			}
		case AggMax:
			if hasNum {
				out = append(out, TrendPoint{Time: t, Value: mx, Quality: q})
			}
		case AggFirst:
			if first != nil {
				out = append(out, TrendPoint{Time: t, Value: first.v, Quality: q})
			}
		case AggLast:
			if last != nil {
				out = append(out, TrendPoint{Time: t, Value: last.v, Quality: q})
			}
		case AggAvg:
			if hasHeld {
				if d := min(b, holdEnd) - cur; d > 0 {
					wsum += held * float64(d)
					wtot += float64(d)
				}
			}
			if wtot > 0 {
				out = append(out, TrendPoint{Time: t, Value: wsum / wtot, Quality: q})
			}
		}
	}
	return out, bad
}
