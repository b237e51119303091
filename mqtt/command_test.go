package mqtt

import (
	"encoding/json"
	"testing"
	"time"
)

func TestSign_VerifiesOverTheExactBodyBytes(t *testing.T) {
	k := newKey(t, "sup-a")
	ts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := k.sign(t, CmdRun, "c1", ts, `{ "entry" : "pumps.start" }`)
	id, env, err := DecodeEnvelope(CmdRun, p)
	if err != nil || id != "c1" {
		t.Fatalf("decode: %q %v", id, err)
	}
	pub, _ := ParsePublicKey(k.pub)
	if r := env.Verify(pub); r != nil {
		t.Fatalf("verify: %v", r)
	}
	if string(env.Body) != `{"entry":"pumps.start"}` || env.TSText != "2026-12-01T10:00:00Z" {
		t.Errorf("body %s ts %s", env.Body, env.TSText)
	}
	// The same body re-spaced is other bytes: the signature no longer holds.
	env.Body = json.RawMessage(`{"entry": "pumps.start"}`)
	if r := env.Verify(pub); r == nil || r.Kind != KindBadSignature {
		t.Errorf("re-spaced body verified: %v", r)
	}
	// Signed for another topic: refused.
	_, env, _ = DecodeEnvelope(CmdPush, p)
	if r := env.Verify(pub); r == nil || r.Kind != KindBadSignature {
		t.Errorf("a run signature verified as a push: %v", r)
	}
}

func TestEnvelope_Fresh(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {4 * time.Second, true}, {6 * time.Second, false}, {-4 * time.Second, true}, {-6 * time.Second, false}} {
		env := &Envelope{TS: now.Add(-c.age)}
		if got := env.Fresh(now, 5*time.Second) == nil; got != c.want {
			t.Errorf("age %s: fresh %v, want %v", c.age, got, c.want)
		}
	}
}

func TestMatch_MQTTWildcards(t *testing.T) {
	for _, c := range []struct {
		f, t string
		want bool
	}{
		{"a/b", "a/b", true}, {"a/+", "a/b", true}, {"a/+", "a/b/c", false}, {"a/#", "a/b/c", true},
		{"a/#", "a", true}, {"+/b", "a/b", true}, {"a/b", "a/c", false}, {"a", "a/b", false},
	} {
		if got := Match(c.f, c.t); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.f, c.t, got)
		}
	}
}

func TestBackoff_CappedWithJitter(t *testing.T) {
	lo, hi := 100*time.Millisecond, time.Second
	for n := range 10 {
		d := backoff(n, lo, hi)
		ceil := min(lo<<n, hi)
		if d < ceil/2 || d > ceil {
			t.Errorf("backoff(%d) = %s, want within [%s, %s]", n, d, ceil/2, ceil)
		}
	}
}

func TestPublishPolicy_RuleByPathThenLongestPrefix(t *testing.T) {
	p := &PublishPolicy{Rules: []PublishRule{
		{Prefix: "", Mode: ModeChange, QoS: 1},
		{Prefix: "Line1", Mode: ModeInterval, Interval: time.Second},
		{Prefix: "Line1/Secret", Mode: ModeOff},
		{Path: "Line1/Secret/Shown", Mode: ModeChange, Retain: true},
		{Path: "Other/Hidden", Mode: ModeOff},
	}}
	if _, ok := p.Rule("Other/Hidden"); ok {
		t.Error("Other/Hidden: a path rule with mode off still publishes")
	}
	if r, ok := p.Rule("Other/X"); !ok || r.Mode != ModeChange {
		t.Errorf("Other/X: %+v %v", r, ok)
	}
	if r, ok := p.Rule("Line1/Pump"); !ok || r.Mode != ModeInterval {
		t.Errorf("Line1/Pump: %+v %v", r, ok)
	}
	if r, ok := p.Rule("Line10/Pump"); !ok || r.Mode != ModeChange {
		t.Errorf("Line10/Pump (prefixes are whole segments): %+v %v", r, ok)
	}
	if _, ok := p.Rule("Line1/Secret/Key"); ok {
		t.Error("Line1/Secret/Key is off")
	}
	if r, ok := p.Rule("Line1/Secret/Shown"); !ok || !r.Retain {
		t.Errorf("Line1/Secret/Shown: %+v %v", r, ok)
	}
}

// FuzzDecodeEnvelope: any payload on any command topic decodes to an
// envelope or a typed refusal, never a panic; an accepted envelope's body
// is an object and its id a valid topic level.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(CmdPush, []byte(`{"id":"c1","key_id":"sup-a","ts":"2026-12-01T10:00:00Z","body":{"module":"m","version":1,"code":"x=1"},"sig":"AA=="}`))
	f.Add(CmdWrite, []byte(`{"id":"c2","key_id":"k","ts":"2026-12-01T10:00:00.5Z","body":{"writes":[{"path":"A/B","value":1}]}}`))
	f.Add(CmdRun, []byte(`{"id":"a/b","body":[]}`))
	f.Add("cmd/x", []byte(`{"id":"c3","id":"c4"}`))
	f.Add(CmdRun, []byte(`{"id":"c5"} {}`))
	f.Fuzz(func(t *testing.T, topic string, payload []byte) {
		id, env, err := DecodeEnvelope(topic, payload)
		if id != "" && !ValidID(id) {
			t.Fatalf("id %q returned", id)
		}
		if err != nil {
			if _, ok := err.(*Refusal); !ok {
				t.Fatalf("error %T is not a *Refusal", err)
			}
			return
		}
		if env.Body[0] != '{' || !ValidID(env.ID) || !json.Valid(env.Body) {
			t.Fatalf("accepted %+v", env)
		}
	})
}
