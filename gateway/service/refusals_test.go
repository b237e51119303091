package service

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
)

// TestCredentialRefusals_AggregatedPerSourceAndReason: a flood of refused
// tokens from one address makes one record at once and one with the
// count when the window closes; another address or reason has its own;
// the counts add up to the refusals.
func TestCredentialRefusals_AggregatedPerSourceAndReason(t *testing.T) {
	var mu sync.Mutex
	var recs []store.AuditRecord
	c := newCredentialRefusals(func(r store.AuditRecord) { mu.Lock(); recs = append(recs, r); mu.Unlock() })
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return at }
	c.after = func(time.Duration, func()) {} // the windows are closed below, by flush
	for range 1000 {
		c.refuse("10.0.0.5", "GET /api/v1/tags", gateway.CredentialUnknown)
	}
	c.refuse("10.0.0.5", "GET /api/v1/tags", gateway.CredentialMissing)
	c.refuse("10.0.0.6", "POST /api/v1/tags/write", gateway.CredentialRevoked)
	if len(recs) != 3 {
		t.Fatalf("%d records while the windows are open, want 3 (the first of each source and reason)", len(recs))
	}
	at = at.Add(3 * time.Second)
	c.refuse("10.0.0.6", "POST /api/v1/tags/write", gateway.CredentialRevoked)
	c.flush()
	type key struct{ source, reason string }
	count := map[key]int{}
	records := map[key]int{}
	for _, r := range recs {
		var after struct {
			Source, Reason string
			Count          int
		}
		if err := json.Unmarshal(r.After, &after); err != nil {
			t.Fatal(err)
		}
		if r.Action != "auth.refused" || r.Result != "unauthenticated" || r.Target == "" {
			t.Errorf("record %+v: want action auth.refused, result unauthenticated, the route", r)
		}
		k := key{after.Source, after.Reason}
		count[k] += after.Count
		records[k]++
	}
	want := map[key]int{{"10.0.0.5", "unknown"}: 1000, {"10.0.0.5", "missing"}: 1, {"10.0.0.6", "revoked"}: 2}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%v: counted %d, want %d", k, count[k], n)
		}
	}
	if records[key{"10.0.0.5", "unknown"}] != 2 || len(recs) != 5 {
		t.Errorf("%d records (%v), want 5: two for the flood, one for the missing token, two for the revoked one", len(recs), records)
	}
	if d := recs[0].Detail; d != "request with an unknown token from 10.0.0.5" {
		t.Errorf("first record's detail %q", d)
	}
	found := false
	for _, r := range recs[3:] {
		found = found || r.Detail == "999 requests with an unknown token from 10.0.0.5"
	}
	if !found {
		t.Errorf("no record of the flood's 999 further refusals among %+v", recs[3:])
	}
}

// TestCredentialRefusals_BoundedSources: beyond credentialKeys tracked
// pairs, further sources are counted under "other", never more entries.
func TestCredentialRefusals_BoundedSources(t *testing.T) {
	n := 0
	c := newCredentialRefusals(func(store.AuditRecord) { n++ })
	c.after = func(time.Duration, func()) {}
	for i := range credentialKeys + 500 {
		c.refuse(string(rune('a'+i%26))+string(rune(i)), "GET /api/v1/tags", gateway.CredentialUnknown)
	}
	if len(c.m) != credentialKeys+1 {
		t.Fatalf("%d pairs tracked, want %d and the one of %q", len(c.m), credentialKeys, otherSources)
	}
	if rc := c.m[refusalKey{otherSources, gateway.CredentialUnknown}]; rc == nil || rc.n != 499 {
		t.Fatalf("other sources counted %+v, want 499 after the first", rc)
	}
}
