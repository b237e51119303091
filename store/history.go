package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
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

// HistoryOptions configures OpenHistory. Zero fields take
// DefaultHistoryOptions; MaxAge and MaxBytes zero mean no limit.
type HistoryOptions struct {
	// Queue is how many samples may wait for their group commit; samples
	// offered beyond it are dropped and counted (Stats.Dropped, Alarms).
	Queue int
	// CommitEvery is the group-commit period: samples offered meanwhile are
	// committed together, in one transaction (bench/README.md, B9).
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
// bench/README.md, B9's 10), checkpoints every minute or 1,000,000 samples
// (about 16 MB of journal), retention every 10 minutes.
var DefaultHistoryOptions = HistoryOptions{
	Queue: 262144, CommitEvery: 250 * time.Millisecond,
	CheckpointEvery: time.Minute, CheckpointSamples: 1000000,
	RetentionEvery: 10 * time.Minute,
}

// Sample is one recorded value of a tag: its source time (UTC), value,
// quality and the raw OPC UA status code (0 for other drivers): a status
// change alone (Good → Good_Clamped) is recorded as what it is.
type Sample struct {
	Time       time.Time
	Value      value.Value
	Quality    value.Quality
	StatusCode uint32
}

// HistoryStats are a History's counters since OpenHistory, for health and
// metrics.
type HistoryStats struct {
	Offered            uint64 // samples offered (Offer and Record)
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
	Queue              int    // samples waiting to be committed (the bounded queue and a failed commit's backlog)
}

// History records tag history (docs/project.md, store: history; issue 4
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
	offered    uint64
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

	reqs chan *histReq
	stop chan struct{}
	done chan struct{}
}

type qsample struct {
	path string
	s    sample
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
		ids: map[string]uint32{}, paths: map[uint32]string{}, open: map[uint32]*openSeries{},
		reqs: make(chan *histReq), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := h.load(); err != nil {
		return nil, fmt.Errorf("store: open history: %w", err)
	}
	h.lastCheckpoint = opts.now()
	go h.run()
	return h, nil
}

// Offer is the tag engine's history feed (tagengine.Engine.SubscribeHistory,
// which applies each tag's recording policy): it records v for path
// without blocking. v.Time is the source timestamp (now when zero). A
// sample the queue cannot take is dropped and counted (docs/architecture.md: events
// are never dropped silently).
func (h *History) Offer(path string, v value.VQT) {
	h.Record(path, Sample{Time: v.Time, Value: v.Value, Quality: v.Quality, StatusCode: v.StatusCode})
}

// Record queues s for path and reports whether the queue took it; a
// refused sample is counted as dropped. Which changes are recorded is not
// the store's to decide: the tag engine's history policy decides
// (tagengine.HistoryPolicy).
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
	return h.enqueueLocked(path, sample{t: t.UnixNano(), q: s.Quality, sc: s.StatusCode, v: s.Value})
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

// tick commits what was offered and runs a due checkpoint or retention. It returns the commit's error.
func (h *History) tick(final bool) error {
	now := h.opts.now()
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
		rec = appendQuality(rec, q.s.q, q.s.sc)
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
	s.Offered, s.Dropped, s.Queue = h.offered, h.dropped, len(h.in)+h.backlog
	h.inMu.Unlock()
	return s
}

// dropAlarmFor is how long a queue overflow stays in Alarms.
const dropAlarmFor = 10 * time.Minute

// Alarms returns what health must show about history, one reason each: a
// failing retention job (docs/config.md, "history": retention is what keeps
// the file from growing, so its failure is raised), failing commits, and
// queue overflows in the last 10 minutes. Empty when all is well.
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
