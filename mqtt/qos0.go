package mqtt

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// QoS 0 tag values (docs/mqtt.md, "Writes"): written straight to the
// connection's wire while the link is up, queued in the outbox (at QoS 1)
// while it is down. A QoS 0 publish has no acknowledgement, and a write
// succeeds as soon as the bytes are in the socket's buffer: a value
// written while the connection is already dying, before anything noticed,
// never reaches the broker (for paho's own QoS 0 path the same loss:
// https://github.com/eclipse-paho/paho.mqtt.golang/issues/630). So the
// link keeps what it wrote since the broker last proved it had read the
// stream (a PINGRESP to a PINGREQ written after it, wire.go), asks for
// such a proof after writing values unless a PINGREQ is outstanding (its
// answer comes first) or one went out less than pingSpacing ago
// (publishTags' tick asks again for what was not covered: confirmQoS0),
// and when the connection ends without one, queues what it kept in the
// outbox: it goes out again at QoS 1 on the next connection, maybe a
// second time (same seq), never not at all. What is kept is bounded
// (maxUnconfirmed): at the bound a publish waits for the broker to
// confirm (as for room in the wire's pending buffer), and a connection
// that confirms nothing within the write timeout is treated as lost: what
// was kept is queued, and its topics wait behind it.

// maxUnconfirmed bounds the QoS 0 messages kept until the broker
// confirms them (unconfirmedCost each): above what the wire's pending
// buffer (maxPending) and the sockets' buffers usually hold in flight, so
// it holds a publish back only when the broker reads slower than that.
const maxUnconfirmed = 32 << 20

// pingSpacing is the least time between two PINGREQs askConfirm writes.
const pingSpacing = 10 * time.Millisecond

// q0State is the QoS 0 path's state: the topics waiting behind a queued
// message and the messages written but not yet confirmed. mu is held for
// a whole publishDirect and while runConnection ends a connection, so a
// message is either written and kept, or queued, never both nor neither;
// it is taken before Link.mu.
type q0State struct {
	mu       sync.Mutex
	queuedAt map[string]uint64 // QoS 0 topics with a message in the outbox: a sequence number at or above its last
	w        *wire             // the wire the kept messages were written to
	kept     []keptRun         // written to w, not yet confirmed, in write order from head
	head     int
	bytes    int           // unconfirmedCost of kept[head:]
	max      int           // bound of bytes
	wait     time.Duration // how long a publish waits for room under max before the connection counts as lost
	spacing  time.Duration // pingSpacing
	lastPing time.Time     // when askConfirm last wrote a PINGREQ
}

// keptRun is QoS 0 messages written to the wire one after the other,
// the last up to stream offset end, and what keeping them costs.
type keptRun struct {
	msgs []Message
	end  uint64
	cost int
}

// unconfirmedCost is what keeping m costs: its payload and its entry (the
// topic is publishTags' string of the tag, shared).
func unconfirmedCost(m Message) int { return len(m.Payload) + 80 }

// publishDirect publishes msgs at QoS 0 when the link is up, else queues
// them (through the outbox at QoS 1). Order per topic is kept: while an
// earlier message of a topic is still in the outbox (its sequence number
// at or above the outbox's head), that topic's messages are queued behind
// it; every other topic goes straight out, so a backlog of some values
// never holds the live ones of the rest in the outbox (a live rate above
// the drain rate would keep them there for good). The packets are written
// straight to the connection's wire, not through paho's publish path (a
// QoS 0 publish has no state for the client to keep), and kept until the
// broker confirms it read them; when the wire has failed or closed, what
// was kept unconfirmed, then the message and the rest, are queued instead.
// Only publishTags calls it; msgs is kept (it must not change after).
func (l *Link) publishDirect(ctx context.Context, msgs []Message) error {
	q := &l.q0
	q.mu.Lock()
	defer q.mu.Unlock()
	c, w := l.current()
	up := c != nil && w != nil && c.IsConnectionOpen()
	if q.w != nil && (!up || q.w != w) { // the connection of the kept messages ended
		if err := l.requeueKept(ctx); err != nil {
			return err
		}
	}
	if !up {
		return l.queueDirect(ctx, msgs)
	}
	var head uint64 // the outbox's oldest sequence number; 0: empty
	if l.opts.Outbox.Stats().Depth > 0 {
		if qd, err := l.opts.Outbox.Read(0, 1); err != nil {
			if err := l.requeueKept(ctx); err != nil { // what was kept goes first: order per topic
				return err
			}
			return l.queueDirect(ctx, msgs)
		} else if len(qd) > 0 {
			head = qd[0].Seq
		}
	}
	for t, seq := range q.queuedAt {
		if head == 0 || seq < head {
			delete(q.queuedAt, t) // delivered (or dropped by the outbox's bounds)
		}
	}
	q.trim(w.confirmedAt())
	q.w = w
	// The messages written go into q.kept as runs: slices of msgs
	// (msgs[from:i] is the run being written, cost its cost).
	var queue []Message
	from, cost, end := 0, 0, uint64(0)
	keep := func(to int) {
		if to > from {
			q.kept = append(q.kept, keptRun{msgs[from:to:to], end, cost})
			q.bytes += cost
		}
		from, cost = to, 0
	}
	for i, m := range msgs {
		if _, behind := q.queuedAt[m.Topic]; behind {
			keep(i)
			from = i + 1
			queue = append(queue, m)
			continue
		}
		c := unconfirmedCost(m)
		if q.bytes+cost+c > q.max {
			keep(i)
			if !l.awaitRoom(ctx, w, c) {
				// No confirmation for that long: the connection is as
				// good as lost; what was kept goes to the outbox (its
				// topics then wait behind it), the rest carries on.
				if err := l.requeueKept(ctx); err != nil {
					return err
				}
				q.w = w
				if _, behind := q.queuedAt[m.Topic]; behind || c > q.max {
					from = i + 1
					queue = append(queue, m)
					continue
				}
			}
		}
		e, err := w.writePublish0(l.base, m.Topic, m.Retain, m.Payload)
		if err != nil {
			keep(i)
			if err := l.requeueKept(ctx); err != nil {
				return err
			}
			return l.queueDirect(ctx, append(queue, msgs[i:]...))
		}
		end, cost = e, cost+c
	}
	keep(len(msgs))
	q.askConfirm()
	if len(queue) > 0 {
		return l.queueDirect(ctx, queue)
	}
	return nil
}

// awaitRoom waits until the kept values leave room for need more: the
// broker confirms what it read (a PINGRESP), as a write waits for room in
// the wire's pending buffer (q0.mu held). It reports false when no room
// came: the wire ended, ctx ended, or nothing was confirmed within
// q0.wait.
func (l *Link) awaitRoom(ctx context.Context, w *wire, need int) bool {
	q := &l.q0
	if need > q.max {
		return false
	}
	t := time.NewTimer(q.wait)
	defer t.Stop()
	for q.bytes+need > q.max {
		w.ping()
		select {
		case <-w.pongc:
			q.trim(w.confirmedAt())
		case <-w.done:
			return false
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		}
	}
	return true
}

// confirmQoS0 asks the broker to confirm the kept QoS 0 values, as
// publishDirect does after writing; publishTags calls it on its tick, so
// values written while a PINGREQ was outstanding are confirmed too, not
// only after the next pass.
func (l *Link) confirmQoS0() {
	q := &l.q0
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.w != nil {
		q.trim(q.w.confirmedAt())
	}
	q.askConfirm()
}

// askConfirm writes a PINGREQ when values are kept unconfirmed, none is
// outstanding and the last was at least pingSpacing ago (q.mu held): at
// most one a round trip, and pingSpacing bounds the rate when small
// passes come fast; the tick asks for what was written in between.
func (q *q0State) askConfirm() {
	if q.bytes == 0 || q.w == nil {
		return
	}
	if now := time.Now(); now.Sub(q.lastPing) >= q.spacing && q.w.ping() {
		q.lastPing = now
	}
}

// queueDirect queues QoS 0 messages in the outbox and remembers, per
// topic, a sequence number at or above the last one queued (q0.mu held).
func (l *Link) queueDirect(ctx context.Context, msgs []Message) error {
	err := l.enqueue(ctx, msgs)
	last := l.opts.Outbox.Stats().LastSeq
	for _, m := range msgs {
		l.q0.queuedAt[m.Topic] = last
	}
	return err
}

// trim forgets the kept messages the broker has read: the runs written
// before offset confirmed (a run confirmed in part is kept whole).
func (q *q0State) trim(confirmed uint64) {
	for q.head < len(q.kept) && q.kept[q.head].end <= confirmed {
		q.bytes -= q.kept[q.head].cost
		q.kept[q.head] = keptRun{}
		q.head++
	}
	switch {
	case q.head == len(q.kept):
		q.kept, q.head = q.kept[:0], 0
	case q.head >= 256 && q.head*2 >= len(q.kept):
		n := copy(q.kept, q.kept[q.head:])
		clear(q.kept[n:])
		q.kept, q.head = q.kept[:n], 0
	}
}

// dropKept forgets every kept message: the broker confirmed them
// otherwise (q0.mu held).
func (l *Link) dropKept() {
	q := &l.q0
	clear(q.kept)
	q.kept, q.head, q.bytes, q.w = q.kept[:0], 0, 0, nil
}

// requeueKept queues the kept messages the broker has not confirmed, in
// the order written, for the next connection (q0.mu held). It runs once
// the connection they were written to ended or failed, also while the
// link stops.
func (l *Link) requeueKept(ctx context.Context) error {
	q := &l.q0
	if q.w != nil {
		q.trim(q.w.confirmedAt())
	}
	var msgs []Message
	for _, k := range q.kept[q.head:] {
		msgs = append(msgs, k.msgs...)
	}
	l.dropKept()
	if len(msgs) == 0 {
		return nil
	}
	l.log.Info("mqtt QoS 0 values the broker did not confirm: queued to go out again", slog.Int("messages", len(msgs)))
	return l.queueDirect(context.WithoutCancel(ctx), msgs)
}
