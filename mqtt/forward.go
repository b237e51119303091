package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"qubiq.dev/edge/tagpath"
)

// Store-and-forward (docs/mqtt.md): every outgoing message is appended to
// the outbox first (committed), and the forwarder of the current
// connection publishes the outbox in order at QoS 1, removing a message
// only once the broker acknowledged it (PUBACK) on that same connection.

// window is how many messages the forwarder has in flight at once.
const window = 1024

// enqueue appends msgs (topics below the base) to the outbox, committed
// before it returns. Drops the outbox made to stay in its bounds are
// logged.
func (l *Link) enqueue(ctx context.Context, msgs []Message) error {
	full := make([]Message, len(msgs))
	for i, m := range msgs {
		full[i] = m
		full[i].Topic = l.base + "/" + m.Topic
		if full[i].Queued.IsZero() {
			full[i].Queued = time.Now().UTC()
		}
	}
	dropped, err := l.opts.Outbox.Append(ctx, full)
	if dropped > 0 {
		l.log.Warn("mqtt outbox full: oldest messages dropped", slog.Int("dropped", dropped),
			slog.Uint64("dropped_total", l.opts.Outbox.Stats().Dropped))
	}
	if err != nil {
		return fmt.Errorf("mqtt: outbox: %w", err)
	}
	return nil
}

// forward drains the outbox over c until gen ends (the connection is
// lost or the link stops). The backlog (what was queued when the
// connection came up) goes first, in order; a message queued since then
// waits at most live_latency before it is sent beside the backlog, in its
// own order. Up to window messages are in flight (a sliding window: the
// next is published as the oldest is acknowledged); a message is removed
// only once its PUBACK came on this connection. A paho client here never
// reconnects, so a token that completed without error completed on a
// PUBACK of this connection, never across a reconnect
// (https://github.com/eclipse-paho/paho.mqtt.golang/issues/563).
func (l *Link) forward(gen context.Context, c paho.Client) {
	backlogEnd := l.opts.Outbox.Stats().LastSeq
	nextBacklog, nextLive := uint64(0), backlogEnd+1
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	// Acknowledged messages are removed by one goroutine, every batch
	// waiting at that moment in one commit (a commit is an fsync).
	removals := make(chan []uint64, 64)
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		for seqs := range removals {
		more:
			for {
				select {
				case s, ok := <-removals:
					if !ok {
						break more
					}
					seqs = append(seqs, s...)
				default:
					break more
				}
			}
			if err := l.opts.Outbox.Remove(context.WithoutCancel(gen), seqs); err != nil {
				l.log.Error("mqtt outbox remove failed", slog.Any("err", err))
			}
		}
	}()
	defer func() { close(removals); <-removed }()

	type sent struct {
		seq uint64
		tok paho.Token
	}
	var fl []sent // in flight, in publish order
	fill := func() error {
		for len(fl) < window {
			fromLive := nextBacklog > backlogEnd
			if !fromLive {
				if head, _ := l.opts.Outbox.Read(nextLive, 1); len(head) > 0 && time.Since(head[0].Queued) > l.cfg.LiveLatency {
					fromLive = true
				}
			}
			from := nextBacklog
			if fromLive {
				from = nextLive
			}
			batch, err := l.opts.Outbox.Read(from, window-len(fl))
			if err != nil {
				return err
			}
			if !fromLive {
				for i, q := range batch {
					if q.Seq > backlogEnd {
						batch = batch[:i]
						break
					}
				}
				if len(batch) == 0 {
					nextBacklog = backlogEnd + 1
					continue
				}
			}
			if len(batch) == 0 {
				return nil
			}
			for _, q := range batch {
				if err := tagpath.CheckTopicText(q.Topic); err != nil {
					// Queued by a build that did not check its topics:
					// the broker would close the connection at every
					// attempt, and the outbox would hold it for ever.
					l.log.Error("mqtt outbox: a message on a topic the broker refuses is dropped, not sent",
						slog.String("topic", strconv.Quote(q.Topic)), slog.Uint64("seq", q.Seq), slog.Any("err", err))
					removals <- []uint64{q.Seq}
					continue
				}
				fl = append(fl, sent{q.Seq, c.Publish(q.Topic, 1, q.Retain, q.Payload)})
			}
			if next := batch[len(batch)-1].Seq + 1; fromLive {
				nextLive = next
			} else {
				nextBacklog = next
			}
		}
		return nil
	}
	for gen.Err() == nil {
		if err := fill(); err != nil {
			l.log.Error("mqtt outbox read failed", slog.Any("err", err))
			if !sleep(gen, time.Second) {
				return
			}
			continue
		}
		if len(fl) == 0 {
			select {
			case <-l.opts.Outbox.Notify():
			case <-poll.C:
			case <-gen.Done():
				return
			}
			continue
		}
		select {
		case <-fl[0].tok.Done():
		case <-gen.Done():
			return
		}
		var acked []uint64
	pop:
		for len(fl) > 0 {
			select {
			case <-fl[0].tok.Done():
			default:
				break pop
			}
			if err := fl[0].tok.Error(); err != nil {
				if len(acked) > 0 {
					removals <- acked
				}
				l.log.Warn("mqtt publish not acknowledged; it stays in the outbox", slog.Any("err", err))
				return
			}
			acked = append(acked, fl[0].seq)
			fl = fl[1:]
		}
		if len(acked) > 0 {
			removals <- acked
		}
	}
}

// expireLoop drops messages older than the outbox's max_age every minute,
// also while the link is down.
func (l *Link) expireLoop(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if n, err := l.opts.Outbox.Expire(ctx); err != nil {
				l.log.Error("mqtt outbox expiry failed", slog.Any("err", err))
			} else if n > 0 {
				l.log.Warn("mqtt outbox: messages older than max_age dropped", slog.Int("dropped", n))
			}
		case <-ctx.Done():
			return
		}
	}
}
