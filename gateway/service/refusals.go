package service

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
)

// Refused credentials (a missing, unknown, revoked or expired bearer
// token) are audited per source address and reason, aggregated over
// credentialWindow: the first refusal of a (source, reason) is recorded at
// once with count 1; the others within the window are counted and
// recorded in one record when the window closes. A flood from one
// address thus makes two records per window, not one per request; at most
// credentialKeys (source, reason) pairs are tracked at once, further
// sources are counted under the source "other".

// credentialWindow is how long refusals of one source and reason are
// counted into one record.
const credentialWindow = 10 * time.Second

// credentialKeys bounds the (source, reason) pairs counted at once.
const credentialKeys = 256

// otherSources is the source of refusals counted once credentialKeys
// pairs are tracked.
const otherSources = "other"

type refusalKey struct{ source, reason string }

type refusalCount struct {
	n           int // refusals not yet recorded
	first, last time.Time
	target      string // the first route refused in the window
}

// credentialRefusals aggregates refused credentials into audit records.
type credentialRefusals struct {
	window time.Duration
	now    func() time.Time
	emit   func(store.AuditRecord)
	// after runs f after d (time.AfterFunc); tests hold the windows open.
	after func(d time.Duration, f func())

	mu sync.Mutex
	m  map[refusalKey]*refusalCount
}

func newCredentialRefusals(emit func(store.AuditRecord)) *credentialRefusals {
	return &credentialRefusals{window: credentialWindow, now: time.Now, emit: emit,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }, m: map[refusalKey]*refusalCount{}}
}

// refuse counts one refusal; the first of its window is recorded at once.
func (c *credentialRefusals) refuse(source, target, reason string) {
	now := c.now().UTC()
	k := refusalKey{source, reason}
	c.mu.Lock()
	if _, ok := c.m[k]; !ok && len(c.m) >= credentialKeys {
		k.source = otherSources
	}
	if rc, ok := c.m[k]; ok {
		rc.n++
		rc.last = now
		c.mu.Unlock()
		return
	}
	c.m[k] = &refusalCount{first: now, last: now, target: target}
	c.mu.Unlock()
	c.emit(credentialRecord(k, target, 1, now, now))
	c.after(c.window, func() { c.close(k) })
}

// close ends the window of k, recording the refusals counted in it.
func (c *credentialRefusals) close(k refusalKey) {
	c.mu.Lock()
	rc, ok := c.m[k]
	delete(c.m, k)
	c.mu.Unlock()
	if ok && rc.n > 0 {
		c.emit(credentialRecord(k, rc.target, rc.n, rc.first, rc.last))
	}
}

// flush ends every window now (at shutdown, so no count is lost).
func (c *credentialRefusals) flush() {
	c.mu.Lock()
	keys := make([]refusalKey, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.close(k)
	}
}

// credentialRecord is the audit record of n refusals of one source and
// reason between first and last: action "auth.refused", result
// "unauthenticated", after {"source", "reason", "count", "first", "last"}.
func credentialRecord(k refusalKey, target string, n int, first, last time.Time) store.AuditRecord {
	what := map[string]string{
		gateway.CredentialMissing: "no credentials",
		gateway.CredentialUnknown: "an unknown token",
		gateway.CredentialRevoked: "a revoked token",
		gateway.CredentialExpired: "an expired token",
	}[k.reason]
	if what == "" {
		what = k.reason
	}
	detail := fmt.Sprintf("request with %s from %s", what, k.source)
	if n > 1 {
		detail = fmt.Sprintf("%d requests with %s from %s", n, what, k.source)
	}
	rec := store.AuditRecord{Time: last, Origin: "rest", Action: "auth.refused", Target: target,
		Result: "unauthenticated", Detail: detail}
	rec.After, _ = json.Marshal(map[string]any{"source": k.source, "reason": k.reason, "count": n,
		"first": first.Format(time.RFC3339Nano), "last": last.Format(time.RFC3339Nano)})
	return rec
}

// AuditCredentialRefusal records a request refused for its credentials,
// aggregated per source and reason (gateway.Audit).
func (s *Service) AuditCredentialRefusal(_ context.Context, source, target, reason string) {
	s.refusals.refuse(source, target, reason)
}
