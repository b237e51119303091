package mqtt

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// memOutbox is an in-memory Outbox.
type memOutbox struct {
	mu     sync.Mutex
	seq    uint64
	q      []Queued
	notify chan struct{}
}

func newMemOutbox() *memOutbox { return &memOutbox{notify: make(chan struct{}, 1)} }

func (o *memOutbox) Append(_ context.Context, msgs []Message) (int, error) {
	o.mu.Lock()
	for _, m := range msgs {
		o.seq++
		o.q = append(o.q, Queued{Seq: o.seq, Message: m})
	}
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
	return 0, nil
}

func (o *memOutbox) Read(from uint64, n int) ([]Queued, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Queued
	for _, q := range o.q {
		if q.Seq >= from && len(out) < n {
			out = append(out, q)
		}
	}
	return out, nil
}

func (o *memOutbox) Remove(_ context.Context, seqs []uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	rm := map[uint64]bool{}
	for _, s := range seqs {
		rm[s] = true
	}
	kept := o.q[:0]
	for _, q := range o.q {
		if !rm[q.Seq] {
			kept = append(kept, q)
		}
	}
	o.q = kept
	return nil
}

func (o *memOutbox) Expire(context.Context) (int, error) { return 0, nil }
func (o *memOutbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return OutboxStats{Depth: len(o.q), LastSeq: o.seq}
}
func (o *memOutbox) Notify() <-chan struct{} { return o.notify }

// replies returns the queued replies by topic.
func (o *memOutbox) replies(t *testing.T) map[string]Reply {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]Reply{}
	for _, q := range o.q {
		var r Reply
		if err := json.Unmarshal(q.Payload, &r); err != nil {
			t.Fatalf("reply %s: %v", q.Topic, err)
		}
		out[strings.TrimPrefix(q.Topic, "qubiq/v1/edge1/")] = r
	}
	return out
}

type memSeen struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (s *memSeen) Remember(id string, now time.Time, window time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]time.Time{}
	}
	if at, ok := s.m[id]; ok && now.Sub(at) <= window {
		return true, nil
	}
	s.m[id] = now
	return false, nil
}

// fakeGateway records the calls the link makes; the embedded interface
// panics on anything else.
type fakeGateway struct {
	Gateway
	mu      sync.Mutex
	saves   []gateway.ScriptSource
	runs    []string
	writes  []gateway.TagWrite
	audits  []gateway.AuditEvent
	grants  []auth.Grant
	latest  map[string]int64
	runWait chan struct{}
}

func (f *fakeGateway) SaveScript(_ context.Context, g auth.Grant, src gateway.ScriptSource) (gateway.ScriptSaved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.latest == nil {
		f.latest = map[string]int64{}
	}
	if src.Version <= f.latest[src.Module] {
		return gateway.ScriptSaved{}, gateway.ErrConflict
	}
	f.latest[src.Module] = src.Version
	f.saves = append(f.saves, src)
	f.grants = append(f.grants, g)
	return gateway.ScriptSaved{Module: src.Module, Version: src.Version}, nil
}

func (f *fakeGateway) RunScript(_ context.Context, g auth.Grant, m, e string, _ json.RawMessage) (gateway.ScriptRun, error) {
	if f.runWait != nil {
		<-f.runWait
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, m+"."+e)
	f.grants = append(f.grants, g)
	return gateway.ScriptRun{Result: json.RawMessage(`{"ok":1}`)}, nil
}

func (f *fakeGateway) WriteTags(_ context.Context, g auth.Grant, ws []gateway.TagWrite) ([]gateway.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, ws...)
	f.grants = append(f.grants, g)
	out := make([]gateway.WriteResult, len(ws))
	for i, w := range ws {
		out[i] = gateway.WriteResult{Path: w.Path, Quality: value.Good}
	}
	return out, nil
}

func (f *fakeGateway) CanAudit() error { return nil }
func (f *fakeGateway) Audit(_ context.Context, _ auth.Grant, ev gateway.AuditEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audits = append(f.audits, ev)
	return nil
}
func (f *fakeGateway) Health(context.Context) gateway.HealthReport {
	return gateway.HealthReport{Status: gateway.HealthOK}
}

// testKey is a supervisor key pair.
type testKey struct {
	id   string
	priv ed25519.PrivateKey
	pub  string
}

func newKey(t testing.TB, id string) testKey {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{id: id, priv: priv, pub: base64.StdEncoding.EncodeToString(pub)}
}

func (k testKey) sign(t testing.TB, topic, id string, ts time.Time, body string) []byte {
	t.Helper()
	b, err := Sign(k.priv, k.id, topic, id, ts, json.RawMessage(body))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
