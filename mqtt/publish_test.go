package mqtt

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// tagFeed is a fakeGateway with a tag subscription the test feeds.
type tagFeed struct {
	*fakeGateway
	ch chan gateway.TagValue
}

func (f tagFeed) SubscribeValues(auth.Grant, int) (<-chan gateway.TagValue, func() uint64, func()) {
	return f.ch, func() uint64 { return 0 }, func() {}
}

func (f tagFeed) ListTags(context.Context, auth.Grant) []gateway.TagInfo {
	return []gateway.TagInfo{{Path: "L/A", Scan: time.Second}, {Path: "L/B", Scan: time.Second}, {Path: "L/Slow", Scan: time.Minute}}
}

func publishing(t *testing.T, pol *PublishPolicy) (chan gateway.TagValue, *memOutbox, func()) {
	t.Helper()
	feed := tagFeed{&fakeGateway{}, make(chan gateway.TagValue, 64)}
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: feed, Outbox: ob, Seen: &memSeen{}, Publish: pol})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.publishTags(ctx); close(done) }()
	return feed.ch, ob, func() { cancel(); <-done }
}

func waitQueued(t *testing.T, ob *memOutbox, n int) []Queued {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if q, _ := ob.Read(0, 1000); len(q) >= n {
			return q
		}
		time.Sleep(10 * time.Millisecond)
	}
	q, _ := ob.Read(0, 1000)
	t.Fatalf("%d messages queued, want %d: %+v", len(q), n, q)
	return nil
}

func vqt(p string, v any) gateway.TagValue {
	return gateway.TagValue{Path: p, VQT: value.VQT{Value: v, Quality: value.Good, Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}}
}

// TestPublishTags_ChangeDeadbandOffAndSequence: per-tag messages on
// tags/<path> with value, quality, time and a rising seq; a change inside
// the deadband and a tag whose rule is off are not published.
func TestPublishTags_ChangeDeadbandOffAndSequence(t *testing.T) {
	ch, ob, stop := publishing(t, &PublishPolicy{Rules: []PublishRule{
		{Prefix: "L", Mode: ModeChange, Deadband: 1, QoS: 1, Retain: true},
		{Path: "L/B", Mode: ModeOff},
	}})
	defer stop()
	ch <- vqt("L/A", 10.0)
	ch <- vqt("L/A", 10.5) // inside the deadband
	ch <- vqt("L/B", 1.0)  // off
	ch <- vqt("L/A", 12.0)
	q := waitQueued(t, ob, 2)
	time.Sleep(200 * time.Millisecond)
	if q, _ = ob.Read(0, 100); len(q) != 2 {
		t.Fatalf("%d messages, want 2: %+v", len(q), q)
	}
	var m1, m2 tagMsg
	json.Unmarshal(q[0].Payload, &m1)
	json.Unmarshal(q[1].Payload, &m2)
	if q[0].Topic != "qubiq/v1/edge1/tags/L/A" || !q[0].Retain || string(m1.V) != "10" || m1.Q != "Good" ||
		m1.T != "2026-12-01T10:00:00Z" || string(m2.V) != "12" || m2.Seq != m1.Seq+1 {
		t.Errorf("messages %s %s / %+v %+v", q[0].Topic, q[0].Payload, m1, m2)
	}
}

// TestPublishTags_BatchedOneMessagePerScanClass: batched, the changes of
// one pass go out as one message per scan class on `tags`.
func TestPublishTags_BatchedOneMessagePerScanClass(t *testing.T) {
	ch, ob, stop := publishing(t, &PublishPolicy{Batched: true, Rules: []PublishRule{{Prefix: "", Mode: ModeChange, QoS: 1}}})
	for _, tv := range []gateway.TagValue{vqt("L/A", 1), vqt("L/B", 2), vqt("L/Slow", 3)} {
		ch <- tv
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	q, _ := ob.Read(0, 100)
	values := 0
	for _, m := range q {
		var b struct {
			Seq    uint64       `json:"seq"`
			Values []batchEntry `json:"values"`
		}
		if err := json.Unmarshal(m.Payload, &b); err != nil || m.Topic != "qubiq/v1/edge1/tags" || b.Seq == 0 {
			t.Fatalf("message %s %s: %v", m.Topic, m.Payload, err)
		}
		for _, e := range b.Values {
			if e.P == "L/Slow" && len(b.Values) != 1 {
				t.Errorf("the minute scan class shares a message with the second one: %s", m.Payload)
			}
		}
		values += len(b.Values)
	}
	if values != 3 || len(q) < 2 || len(q) > 3 {
		t.Errorf("%d messages holding %d values; want the 3 values in one message per scan class", len(q), values)
	}
}

// TestPublishTags_IntervalSendsTheLatest: an interval rule publishes the
// latest value at its tick, not every change.
func TestPublishTags_IntervalSendsTheLatest(t *testing.T) {
	ch, ob, stop := publishing(t, &PublishPolicy{Rules: []PublishRule{{Prefix: "L", Mode: ModeInterval, Interval: time.Hour, QoS: 1}}})
	defer stop()
	ch <- vqt("L/A", 1)
	ch <- vqt("L/A", 2)
	ch <- vqt("L/A", 3)
	q := waitQueued(t, ob, 1)
	time.Sleep(300 * time.Millisecond)
	if q, _ = ob.Read(0, 100); len(q) != 1 || !strings.Contains(string(q[0].Payload), `"v":3`) {
		t.Errorf("messages %+v; want one, the latest value 3", q)
	}
}
