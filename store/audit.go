package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrAuditFull is returned by AuditLog.Enqueue when the queue is full (the
// disk is slow or failing). docs/security.md, "Audit": an equipment write whose
// audit record cannot be queued is refused; the caller refuses it.
var ErrAuditFull = errors.New("audit queue full")

// AuditRecord is one audit record (docs/security.md, "Audit"): one per write that
// reaches equipment (Target is the tag, Before the last known VQT and After
// the value written, both as JSON), one per script run, one per refusal, one
// per administrative change. Seq is given by the store when the record is
// committed (1, 2, 3, ... in commit order); Time is UTC.
type AuditRecord struct {
	Seq       uint64          `json:"seq,omitzero"`
	Time      time.Time       `json:"time"`
	Principal string          `json:"principal,omitempty"`
	Realm     string          `json:"realm,omitempty"`
	Origin    string          `json:"origin,omitempty"`
	Script    string          `json:"script,omitempty"`
	Action    string          `json:"action"`
	Target    string          `json:"target,omitempty"`
	Before    json.RawMessage `json:"before,omitempty"`
	After     json.RawMessage `json:"after,omitempty"`
	Result    string          `json:"result,omitempty"`
	Detail    string          `json:"detail,omitempty"`
}

// AuditOptions configures an AuditLog. Zero fields take DefaultAuditOptions.
type AuditOptions struct {
	// Queue is how many records may wait for their commit; Enqueue returns
	// ErrAuditFull beyond it.
	Queue int
	// MaxDelay is how long the first record of a batch waits for others
	// before the batch is committed (Flush and Close do not wait for it).
	MaxDelay time.Duration
	// MaxBatch is the most records committed in one transaction.
	MaxBatch int

	// commitHook, for tests, runs before each commit attempt with the batch
	// size; its error fails the attempt.
	commitHook func(n int) error
}

// DefaultAuditOptions are the defaults of AuditOptions: a queue of 4096
// records, batches of up to 512 records, committed at most 50 ms after the
// first record of the batch was queued.
var DefaultAuditOptions = AuditOptions{Queue: 4096, MaxDelay: 50 * time.Millisecond, MaxBatch: 512}

// Commit retry back-off when the disk fails.
const (
	auditRetryMin = 100 * time.Millisecond
	auditRetryMax = 5 * time.Second
)

// AuditLog group-commits audit records into the store's audit bucket: one
// goroutine takes queued records and commits them in batches, each in one
// transaction, keyed by an 8-byte big-endian sequence (bbolt NextSequence),
// so key order is commit order (big-endian bytes sort as the numbers do).
// Enqueue never blocks.
// A failed commit is logged and retried with back-off, keeping the order;
// meanwhile the queue fills and Enqueue refuses (fail closed).
type AuditLog struct {
	db     *DB
	opts   AuditOptions
	logger *slog.Logger

	mu       sync.Mutex // guards closed, enqueued, refused and sends on queue
	closed   bool
	enqueued uint64
	refused  uint64
	queue    chan []byte

	kick  chan struct{} // Flush asks for the current batch now
	abort chan struct{} // closed by Close when its ctx ends: stop retrying
	done  chan struct{} // closed when the writer returned

	pmu       sync.Mutex // guards the fields below
	committed uint64
	failures  uint64
	lastErr   error
	progress  chan struct{} // closed and replaced on every commit attempt
}

// NewAuditLog starts the audit writer over db. Close it (before db) to drain
// the queue. logger receives commit failures; nil discards.
func NewAuditLog(db *DB, opts AuditOptions, logger *slog.Logger) *AuditLog {
	if opts.Queue <= 0 {
		opts.Queue = DefaultAuditOptions.Queue
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultAuditOptions.MaxDelay
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultAuditOptions.MaxBatch
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &AuditLog{
		db: db, opts: opts, logger: logger,
		queue:    make(chan []byte, opts.Queue),
		kick:     make(chan struct{}, 1),
		abort:    make(chan struct{}),
		done:     make(chan struct{}),
		progress: make(chan struct{}),
	}
	go l.run()
	return l
}

// Enqueue queues rec for the next group commit and returns at once: nil when
// queued, ErrAuditFull when the queue is full, ErrClosed after Close, or an
// error wrapping ErrInvalid when Before or After is not valid JSON (invalid
// UTF-8 in them is stored as U+FFFD, so the log's output stays valid JSON). rec.Seq
// is ignored (the commit gives it); a zero rec.Time is set to now. Only a nil
// return means the record will be committed; a caller making an equipment
// write refuses the write on any error.
func (l *AuditLog) Enqueue(rec AuditRecord) error {
	rec.Seq = 0
	if rec.Time.IsZero() {
		rec.Time = l.db.now()
	}
	rec.Time = rec.Time.UTC()
	rec.Before, rec.After = validUTF8(rec.Before), validUTF8(rec.After)
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("store: audit record %q on %q: %w: %w", rec.Action, rec.Target, err, ErrInvalid)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	select {
	case l.queue <- data:
		l.enqueued++
		return nil
	default:
		l.refused++
		return ErrAuditFull
	}
}

// Flush waits until every record enqueued before the call is committed, and
// asks the writer not to wait MaxDelay meanwhile. It returns ctx's error
// (wrapped) when ctx ends first, the commit error when a commit attempt
// fails while it waits (the writer keeps retrying), and ErrClosed when the
// log was closed without committing them.
func (l *AuditLog) Flush(ctx context.Context) error {
	l.mu.Lock()
	target := l.enqueued
	l.mu.Unlock()
	l.pmu.Lock()
	failures0 := l.failures
	l.pmu.Unlock()
	for {
		l.pmu.Lock()
		committed, failures, lastErr, progress := l.committed, l.failures, l.lastErr, l.progress
		l.pmu.Unlock()
		if committed >= target {
			return nil
		}
		if failures > failures0 {
			return fmt.Errorf("store: audit flush: %w", lastErr)
		}
		select {
		case l.kick <- struct{}{}:
		default:
		}
		select {
		case <-progress:
		case <-l.done:
			l.pmu.Lock()
			committed = l.committed
			l.pmu.Unlock()
			if committed >= target {
				return nil
			}
			return fmt.Errorf("store: audit flush: %d records not committed: %w", target-committed, ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("store: audit flush: %d records not yet committed: %w", target-committed, ctx.Err())
		}
	}
}

// Close stops taking records and commits the queued ones. When ctx ends
// first, the writer stops and Close returns an error (wrapping ctx's) that
// says how many records were not committed. Calling Close again waits for
// the first Close and returns nil.
func (l *AuditLog) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
		}
		return nil
	}
	l.closed = true
	close(l.queue)
	enqueued := l.enqueued
	l.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		close(l.abort)
		<-l.done
	}
	l.pmu.Lock()
	committed, lastErr := l.committed, l.lastErr
	l.pmu.Unlock()
	if committed < enqueued {
		lost := enqueued - committed
		l.logger.Error("audit records not committed at close", slog.Uint64("records", lost), slog.Any("err", lastErr))
		if ctx.Err() != nil {
			return fmt.Errorf("store: audit close: %d records not committed (last error: %v): %w", lost, lastErr, ctx.Err())
		}
		return fmt.Errorf("store: audit close: %d records not committed: %w", lost, lastErr)
	}
	return nil
}

// AuditStats are an AuditLog's counters since NewAuditLog, for health and
// metrics.
type AuditStats struct {
	Enqueued       uint64 // records accepted by Enqueue
	Committed      uint64 // records committed
	Refused        uint64 // Enqueue calls refused with ErrAuditFull
	CommitFailures uint64 // failed commit attempts (each retried)
	LastError      error  // the last commit failure, nil if none
}

// Stats returns the log's counters.
func (l *AuditLog) Stats() AuditStats {
	l.mu.Lock()
	s := AuditStats{Enqueued: l.enqueued, Refused: l.refused}
	l.mu.Unlock()
	l.pmu.Lock()
	s.Committed, s.CommitFailures, s.LastError = l.committed, l.failures, l.lastErr
	l.pmu.Unlock()
	return s
}

// run is the writer: it gathers a batch (up to MaxBatch records, waiting at
// most MaxDelay after the first, or less when Flush kicks) and commits it.
func (l *AuditLog) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		first, ok := <-l.queue
		if !ok {
			return
		}
		batch := [][]byte{first}
		closed := false
		timer.Reset(l.opts.MaxDelay)
	collect:
		for len(batch) < l.opts.MaxBatch {
			select {
			case rec, ok := <-l.queue:
				if !ok {
					closed = true
					break collect
				}
				batch = append(batch, rec)
			case <-timer.C:
				break collect
			case <-l.kick:
				for len(batch) < l.opts.MaxBatch {
					select {
					case rec, ok := <-l.queue:
						if !ok {
							closed = true
							break collect
						}
						batch = append(batch, rec)
					default:
						break collect
					}
				}
				break collect
			}
		}
		timer.Stop()
		if !l.commitRetry(batch) || closed {
			return
		}
	}
}

// commitRetry commits batch, retrying with back-off until it succeeds
// (true) or Close aborts (false).
func (l *AuditLog) commitRetry(batch [][]byte) bool {
	backoff := auditRetryMin
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		err := l.commit(batch)
		l.pmu.Lock()
		if err == nil {
			l.committed += uint64(len(batch))
		} else {
			l.failures++
			l.lastErr = err
		}
		close(l.progress)
		l.progress = make(chan struct{})
		l.pmu.Unlock()
		if err == nil {
			return true
		}
		l.logger.Error("audit commit failed; retrying", slog.Int("records", len(batch)), slog.Duration("backoff", backoff), slog.Any("err", err))
		if retry == nil {
			retry = time.NewTimer(backoff)
		} else {
			retry.Reset(backoff)
		}
		select {
		case <-retry.C:
		case <-l.abort:
			return false
		}
		backoff = min(2*backoff, auditRetryMax)
	}
}

func (l *AuditLog) commit(batch [][]byte) error {
	if l.opts.commitHook != nil {
		if err := l.opts.commitHook(len(batch)); err != nil {
			return err
		}
	}
	return l.db.update(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		b.FillPercent = 0.9 // append-only keys: fill pages, split less
		for _, rec := range batch {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(u64Key(seq), rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// auditQueryMax caps one AuditRecords call, which runs in one read
// transaction (short transactions let freed pages be reused: bbolt README,
// "Caveats & Limitations").
const auditQueryMax = 10000

// AuditRecords returns up to limit committed audit records with a sequence
// number above afterSeq, in sequence order (page with the last Seq). limit
// <= 0 means 1000; it is capped at 10000.
func (db *DB) AuditRecords(afterSeq uint64, limit int) ([]AuditRecord, error) {
	return db.AuditRecordsWhere(afterSeq, limit, nil)
}

// AuditRecordsWhere is AuditRecords keeping only the records for which
// match reports true (nil: every record): up to limit of them, in sequence
// order, looking through the log after afterSeq until it has them.
func (db *DB) AuditRecordsWhere(afterSeq uint64, limit int, match func(AuditRecord) bool) ([]AuditRecord, error) {
	if limit <= 0 {
		limit = 1000
	}
	limit = min(limit, auditQueryMax)
	if afterSeq == ^uint64(0) {
		return nil, nil
	}
	var out []AuditRecord
	err := db.view(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.Seek(u64Key(afterSeq + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			seq, err := keyU64(k)
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			if rec := decodeAuditRecord(seq, v); match == nil || match(rec) {
				out = append(out, rec) // Unmarshal copies Before and After out of the page
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: audit records after %d: %w", afterSeq, err)
	}
	return out, nil
}
