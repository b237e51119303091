package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The supervisor link's outbox (store-and-forward, docs/mqtt.md): messages
// waiting for the broker's acknowledgement, in the order they were queued.
// bucketOutbox holds sequence number (8-byte big-endian) → encoded message;
// bucketOutboxMeta the drop counter. Both are created by the first write, so
// files of schema version 1 take them without a migration.
var (
	bucketOutbox     = []byte("mqtt_outbox")
	bucketOutboxMeta = []byte("mqtt_outbox_meta")
	keyOutboxDropped = []byte("dropped")
)

// OutMsg is one message for the broker: its full topic, payload and retain
// flag, and when it was queued (UTC; max_age counts from it).
type OutMsg struct {
	Topic   string
	Payload []byte
	Retain  bool
	Queued  time.Time
}

// OutEntry is a queued message and its sequence number in the outbox
// (rising, never reused).
type OutEntry struct {
	Seq uint64
	OutMsg
}

// OutboxStats is the outbox now: messages and bytes queued, the oldest
// message's queue time (zero when empty), the last sequence number given,
// and how many messages were dropped, oldest first, to keep within
// max_bytes and max_age (since the file was made).
type OutboxStats struct {
	Depth   int
	Bytes   int64
	Oldest  time.Time
	LastSeq uint64
	Dropped uint64
}

// OutboxOptions bound the outbox: MaxBytes (keys and values; <= 0: no
// bound) and MaxAge (<= 0: no bound).
type OutboxOptions struct {
	MaxBytes int64
	MaxAge   time.Duration
}

// ErrOutboxTooLarge is wrapped by Append for a message bigger than the
// whole outbox.
var ErrOutboxTooLarge = errors.New("message larger than the outbox")

// Outbox is the bbolt outbox. Appends and removals go through one writer
// goroutine that commits every change waiting at that moment in one
// transaction (group commit, fsync'd before the callers return), so a
// message Append returned for survives a kill -9. Close it before the DB.
type Outbox struct {
	db   *DB
	opts OutboxOptions

	mu     sync.Mutex // guards st, closed and sends on ops
	st     OutboxStats
	closed bool

	ops    chan *outboxOp
	done   chan struct{}
	notify chan struct{} // a value after each append
}

type outboxOp struct {
	fn      func(tx *bolt.Tx) error
	err     error
	done    chan struct{}
	dropped int
}

// outboxBatchMax caps the changes committed in one transaction.
const outboxBatchMax = 512

// NewOutbox opens the outbox in db, counting what is queued from an
// earlier run.
func NewOutbox(db *DB, opts OutboxOptions) (*Outbox, error) {
	o := &Outbox{db: db, opts: opts, ops: make(chan *outboxOp, outboxBatchMax), done: make(chan struct{}),
		notify: make(chan struct{}, 1)}
	err := db.view(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bucketOutboxMeta); m != nil {
			if v := m.Get(keyOutboxDropped); len(v) == 8 {
				o.st.Dropped = binary.BigEndian.Uint64(v)
			}
		}
		b := tx.Bucket(bucketOutbox)
		if b == nil {
			return nil
		}
		o.st.LastSeq = b.Sequence()
		c := b.Cursor()
		first := true
		for k, v := c.First(); k != nil; k, v = c.Next() {
			o.st.Depth++
			o.st.Bytes += int64(len(k) + len(v))
			if first {
				m, err := decodeOutMsg(v)
				if err != nil {
					return fmt.Errorf("outbox entry %x: %w", k, err)
				}
				o.st.Oldest = m.Queued
				first = false
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	go o.writer()
	return o, nil
}

// Notify receives a value after appends (coalesced): a sender waiting for
// work selects on it.
func (o *Outbox) Notify() <-chan struct{} { return o.notify }

// Stats returns the outbox's counts now.
func (o *Outbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.st
}

// Append queues msgs, in order, committed before it returns. To stay within
// MaxBytes and MaxAge the oldest messages are dropped first (counted in
// Stats().Dropped); it returns how many were dropped by this call. A
// message bigger than MaxBytes wraps ErrOutboxTooLarge and nothing of the
// call is queued.
func (o *Outbox) Append(ctx context.Context, msgs []OutMsg) (dropped int, err error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	enc := make([][]byte, len(msgs))
	for i, m := range msgs {
		enc[i] = encodeOutMsg(m)
		if o.opts.MaxBytes > 0 && int64(len(enc[i])+8) > o.opts.MaxBytes {
			return 0, fmt.Errorf("store: outbox: %d bytes on %s: %w", len(enc[i]), m.Topic, ErrOutboxTooLarge)
		}
	}
	op := &outboxOp{done: make(chan struct{})}
	op.fn = func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketOutbox)
		if err != nil {
			return err
		}
		for i, v := range enc {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			k := u64Key(seq)
			if err := b.Put(k, v); err != nil {
				return err
			}
			o.st.Depth++
			o.st.Bytes += int64(len(k) + len(v))
			o.st.LastSeq = seq
			if o.st.Depth == 1 {
				o.st.Oldest = msgs[i].Queued
			}
		}
		n, err := o.trim(tx, time.Now())
		op.dropped = n
		return err
	}
	if err := o.run(ctx, op); err != nil {
		return 0, err
	}
	select {
	case o.notify <- struct{}{}:
	default:
	}
	return op.dropped, nil
}

// Expire drops the messages older than MaxAge now (counted as drops) and
// returns how many.
func (o *Outbox) Expire(ctx context.Context) (int, error) {
	op := &outboxOp{done: make(chan struct{})}
	op.fn = func(tx *bolt.Tx) error {
		n, err := o.trim(tx, time.Now())
		op.dropped = n
		return err
	}
	err := o.run(ctx, op)
	return op.dropped, err
}

// trim drops the oldest entries while the outbox is over MaxBytes or its
// oldest entry is older than MaxAge. It runs in the writer's transaction,
// under o.mu.
func (o *Outbox) trim(tx *bolt.Tx, now time.Time) (int, error) {
	b := tx.Bucket(bucketOutbox)
	if b == nil {
		return 0, nil
	}
	dropped := 0
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		over := o.opts.MaxBytes > 0 && o.st.Bytes > o.opts.MaxBytes
		m, err := decodeOutMsg(v)
		if err != nil {
			return dropped, err
		}
		old := o.opts.MaxAge > 0 && now.Sub(m.Queued) > o.opts.MaxAge
		if !over && !old {
			o.st.Oldest = m.Queued
			break
		}
		o.st.Bytes -= int64(len(k) + len(v))
		o.st.Depth--
		if err := c.Delete(); err != nil {
			return dropped, err
		}
		dropped++
	}
	if o.st.Depth == 0 {
		o.st.Oldest = time.Time{}
	}
	if dropped > 0 {
		o.st.Dropped += uint64(dropped)
		m, err := tx.CreateBucketIfNotExists(bucketOutboxMeta)
		if err != nil {
			return dropped, err
		}
		if err := m.Put(keyOutboxDropped, u64Key(o.st.Dropped)); err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// Read returns up to n entries with sequence numbers at or above from, in
// order.
func (o *Outbox) Read(from uint64, n int) ([]OutEntry, error) {
	var out []OutEntry
	err := o.db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(u64Key(from)); k != nil && len(out) < n; k, v = c.Next() {
			m, err := decodeOutMsg(v)
			if err != nil {
				return fmt.Errorf("outbox entry %x: %w", k, err)
			}
			out = append(out, OutEntry{Seq: binary.BigEndian.Uint64(k), OutMsg: m})
		}
		return nil
	})
	return out, err
}

// Remove deletes the entries seqs (those the broker acknowledged),
// committed before it returns; entries already gone are ignored.
func (o *Outbox) Remove(ctx context.Context, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	op := &outboxOp{done: make(chan struct{})}
	op.fn = func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		if b == nil {
			return nil
		}
		for _, s := range seqs {
			k := u64Key(s)
			v := b.Get(k)
			if v == nil {
				continue
			}
			o.st.Bytes -= int64(len(k) + len(v))
			o.st.Depth--
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		o.st.Oldest = time.Time{}
		if k, v := b.Cursor().First(); k != nil {
			m, err := decodeOutMsg(v)
			if err != nil {
				return err
			}
			o.st.Oldest = m.Queued
		}
		return nil
	}
	return o.run(ctx, op)
}

// Close stops the writer after the changes queued; later calls fail with
// ErrClosed.
func (o *Outbox) Close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	close(o.ops)
	o.mu.Unlock()
	<-o.done
}

func (o *Outbox) run(ctx context.Context, op *outboxOp) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	o.mu.Unlock()
	select {
	case o.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-op.done // once sent, the op is committed or failed; never abandoned
	return op.err
}

// writer commits the waiting ops in batches. A failed batch is retried op
// by op, so one op's failure does not fail the others; the counts are
// restored from before the failed transaction.
func (o *Outbox) writer() {
	defer close(o.done)
	for op := range o.ops {
		batch := []*outboxOp{op}
	more:
		for len(batch) < outboxBatchMax {
			select {
			case op, ok := <-o.ops:
				if !ok {
					break more
				}
				batch = append(batch, op)
			default:
				break more
			}
		}
		if err := o.commit(batch); err != nil && len(batch) > 1 {
			for _, op := range batch {
				op.err = o.commit([]*outboxOp{op})
			}
		} else {
			for _, op := range batch {
				op.err = err
			}
		}
		for _, op := range batch {
			close(op.done)
		}
	}
}

func (o *Outbox) commit(batch []*outboxOp) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	saved := o.st
	err := o.db.update(func(tx *bolt.Tx) error {
		for _, op := range batch {
			if err := op.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		o.st = saved
	}
	return err
}

// encodeOutMsg: queued (8 bytes, Unix nanoseconds), flags (1 byte: retain),
// topic length (uvarint), topic, payload.
func encodeOutMsg(m OutMsg) []byte {
	b := make([]byte, 0, 9+binary.MaxVarintLen32+len(m.Topic)+len(m.Payload))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Queued.UnixNano()))
	flags := byte(0)
	if m.Retain {
		flags = 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(m.Topic)))
	b = append(b, m.Topic...)
	return append(b, m.Payload...)
}

func decodeOutMsg(v []byte) (OutMsg, error) {
	if len(v) < 10 {
		return OutMsg{}, errors.New("short entry")
	}
	m := OutMsg{Queued: time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), Retain: v[8]&1 != 0}
	n, w := binary.Uvarint(v[9:])
	if w <= 0 || uint64(len(v)-9-w) < n {
		return OutMsg{}, errors.New("bad topic length")
	}
	m.Topic = string(v[9+w : 9+w+int(n)])
	m.Payload = clone(v[9+w+int(n):])
	return m, nil
}
