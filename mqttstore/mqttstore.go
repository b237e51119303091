// Package mqttstore joins the supervisor link (package mqtt) to the parts
// it must not import: the store's bbolt outbox becomes the link's Outbox,
// and the link's topic subscriptions become the flows' TopicSource
// (mqtt triggers). The daemon builds these; nothing else imports this
// package.
package mqttstore

import (
	"context"
	"sync"

	"qubiq.dev/edge/flow"
	"qubiq.dev/edge/mqtt"
	"qubiq.dev/edge/store"
)

// Outbox is the store's outbox as the link's mqtt.Outbox.
type Outbox struct{ O *store.Outbox }

// Append queues msgs (store.Outbox.Append).
func (a Outbox) Append(ctx context.Context, msgs []mqtt.Message) (int, error) {
	out := make([]store.OutMsg, len(msgs))
	for i, m := range msgs {
		out[i] = store.OutMsg{Topic: m.Topic, Payload: m.Payload, Retain: m.Retain, Queued: m.Queued}
	}
	return a.O.Append(ctx, out)
}

// Read returns up to n entries from sequence number from on
// (store.Outbox.Read).
func (a Outbox) Read(from uint64, n int) ([]mqtt.Queued, error) {
	es, err := a.O.Read(from, n)
	out := make([]mqtt.Queued, len(es))
	for i, e := range es {
		out[i] = mqtt.Queued{Seq: e.Seq, Message: mqtt.Message{Topic: e.Topic, Payload: e.Payload, Retain: e.Retain, Queued: e.Queued}}
	}
	return out, err
}

// Remove deletes acknowledged entries (store.Outbox.Remove).
func (a Outbox) Remove(ctx context.Context, seqs []uint64) error { return a.O.Remove(ctx, seqs) }

// Expire drops entries older than max_age (store.Outbox.Expire).
func (a Outbox) Expire(ctx context.Context) (int, error) { return a.O.Expire(ctx) }

// Notify signals appends (store.Outbox.Notify).
func (a Outbox) Notify() <-chan struct{} { return a.O.Notify() }

// Stats returns the outbox's counts (store.Outbox.Stats).
func (a Outbox) Stats() mqtt.OutboxStats {
	st := a.O.Stats()
	return mqtt.OutboxStats{Depth: st.Depth, Bytes: st.Bytes, Oldest: st.Oldest, LastSeq: st.LastSeq, Dropped: st.Dropped}
}

// Topics is the link's topic subscriptions as the flows' TopicSource.
type Topics struct{ L *mqtt.Link }

// SubscribeTopic subscribes filter on the link (mqtt.Link.SubscribeTopic)
// and hands its messages on as flow.TopicMessage until cancel.
func (t Topics) SubscribeTopic(filter string, buf int) (<-chan flow.TopicMessage, func() uint64, func(), error) {
	in, dropped, cancel, err := t.L.SubscribeTopic(filter, buf)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make(chan flow.TopicMessage, max(buf, 1))
	done := make(chan struct{})
	go func() {
		for {
			select {
			case m := <-in:
				select {
				case out <- flow.TopicMessage{Topic: m.Topic, Payload: m.Payload, Time: m.Time}:
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return out, dropped, func() { once.Do(func() { cancel(); close(done) }) }, nil
}

var (
	_ mqtt.Outbox      = Outbox{}
	_ flow.TopicSource = Topics{}
	_ flow.Publisher   = (*mqtt.Link)(nil)
)
