package mqtt

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
)

func newTestLink(t *testing.T, signed bool, keys ...testKey) (*Link, *fakeGateway, *memOutbox) {
	t.Helper()
	gw, ob := &fakeGateway{}, newMemOutbox()
	cfg := Config{Brokers: []string{"tcp://127.0.0.1:1"}, RequireSigned: signed, StaleAfter: time.Minute,
		TrustedKeys: map[string]string{}, Grants: map[string]GrantConfig{}}
	for _, k := range keys {
		cfg.TrustedKeys[k.id] = k.pub
		cfg.Grants[k.id] = GrantConfig{Scopes: []string{"tag:write", "script:execute"}, WriteLevel: "operate", Permissions: []string{"designer"}}
	}
	l, err := New(Options{ApplianceID: "edge1", Config: cfg, Gateway: gw, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		t.Fatal(err)
	}
	return l, gw, ob
}

func TestCommand_AcceptedRunsUnderTheKeysGrant(t *testing.T) {
	k := newKey(t, "sup-a")
	l, gw, ob := newTestLink(t, true, k)
	now := time.Now()
	l.handle(context.Background(), inbound{topic: CmdPush, payload: k.sign(t, CmdPush, "c1", now, `{"module":"pumps","version":3,"code":"def start(a):\n  return 1\n"}`)})
	l.handle(context.Background(), inbound{topic: CmdRun, payload: k.sign(t, CmdRun, "c2", now, `{"entry":"pumps.start","args":{"x":1}}`)})
	l.handle(context.Background(), inbound{topic: CmdWrite, payload: k.sign(t, CmdWrite, "c3", now, `{"writes":[{"path":"Plant/HR10","value":123}]}`)})
	reps := ob.replies(t)
	for _, id := range []string{"c1", "c2", "c3"} {
		r, ok := reps["reply/"+id]
		if !ok || !r.OK {
			t.Errorf("reply %s: %+v (found %v)", id, r, ok)
		}
	}
	if len(gw.saves) != 1 || gw.saves[0].Version != 3 || len(gw.runs) != 1 || gw.runs[0] != "pumps.start" ||
		len(gw.writes) != 1 || gw.writes[0].Value != int64(123) {
		t.Fatalf("calls: saves %+v runs %v writes %+v", gw.saves, gw.runs, gw.writes)
	}
	for _, g := range gw.grants {
		if g.Principal != "mqtt:sup-a" || g.Realm != auth.RealmSupervisor || g.WriteLevel != auth.LevelOperate || !g.HasScope(auth.TagWrite) {
			t.Errorf("grant %+v; want the configured grant of sup-a", g)
		}
	}
	if len(gw.audits) != 3 || gw.audits[0].Result != "ok" || gw.audits[0].Action != "mqtt.command" {
		t.Errorf("audits %+v; want one ok record per command", gw.audits)
	}
}

func TestCommand_EachRefusalAnsweredWithItsKindAndChangesNothing(t *testing.T) {
	k, other := newKey(t, "sup-a"), newKey(t, "sup-b")
	now := time.Now()
	push := func(id string, ts time.Time, version int) []byte {
		return k.sign(t, CmdPush, id, ts, `{"module":"pumps","version":`+itoa(version)+`,"code":"x=1"}`)
	}
	good := push("r-good", now, 5)
	cases := []struct {
		name, topic, id, kind string
		payload               []byte
	}{
		{"unsigned", CmdPush, "r1", KindUnsigned, []byte(unsignedOf(t, push("r1", now, 6)))},
		{"bad signature", CmdPush, "r2", KindBadSignature, tamper(push("r2", now, 6))},
		{"signed by another key", CmdPush, "r3", KindBadSignature, []byte(strings.Replace(string(other.sign(t, CmdPush, "r3", now, `{"module":"pumps","version":6,"code":"x=1"}`)), `"key_id":"sup-b"`, `"key_id":"sup-a"`, 1))},
		{"unknown key", CmdPush, "r4", KindUnknownKey, other.sign(t, CmdPush, "r4", now, `{"module":"pumps","version":6,"code":"x=1"}`)},
		{"replayed id", CmdPush, "r-good", KindReplayed, good},
		{"push version not above the last", CmdPush, "r5", KindReplayed, push("r5", now, 5)},
		{"stale", CmdPush, "r6", KindStale, push("r6", now.Add(-2*time.Minute), 6)},
		{"too far in the future", CmdPush, "r7", KindStale, push("r7", now.Add(2*time.Minute), 6)},
		{"oversized (not parsed: answered on the errors topic)", CmdPush, "", KindOversized, []byte(`{"id":"r8","pad":"` + strings.Repeat("x", MaxCommandBytes) + `"}`)},
		{"malformed JSON", CmdPush, "r9", KindMalformed, []byte(`{"id":"r9",`)},
		{"not an object", CmdPush, "", KindMalformed, []byte(`[1,2]`)},
		{"id given twice", CmdPush, "", KindMalformed, []byte(`{"id":"a","id":"b"}`)},
		{"duplicate key", CmdPush, "r10", KindMalformed, []byte(`{"id":"r10","key_id":"sup-a","ts":"x","body":{},"body":{"module":"evil"}}`)},
		{"wrong types in the envelope", CmdPush, "r11", KindWrongType, []byte(`{"id":"r11","key_id":"sup-a","ts":12,"body":{}}`)},
		{"wrong types in the body", CmdPush, "r12", KindWrongType, k.sign(t, CmdPush, "r12", now, `{"module":"pumps","version":"7","code":"x=1"}`)},
		{"unknown body key", CmdRun, "r13", KindWrongType, k.sign(t, CmdRun, "r13", now, `{"entry":"pumps.start","sudo":true}`)},
		{"unknown command", "cmd/system/reboot", "r14", KindUnknownCommand, k.sign(t, "cmd/system/reboot", "r14", now, `{}`)},
	}
	l, gw, ob := newTestLink(t, true, k)
	l.handle(context.Background(), inbound{topic: CmdPush, payload: good})
	if len(gw.saves) != 1 {
		t.Fatalf("the good push was not saved")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(ob.q)
			l.handle(context.Background(), inbound{topic: c.topic, payload: c.payload})
			if len(ob.q) != before+1 {
				t.Fatalf("%d replies queued, want 1", len(ob.q)-before)
			}
			topic := strings.TrimPrefix(ob.q[len(ob.q)-1].Topic, "qubiq/v1/edge1/")
			r := ob.replies(t)[topic]
			want := "reply/" + c.id
			if c.id == "" {
				want = ErrorsTopic
			}
			if topic != want || r.OK || r.Error == nil || r.Error.Kind != c.kind {
				t.Errorf("reply on %s: %+v; want kind %q on %s", topic, r, c.kind, want)
			}
			last := gw.audits[len(gw.audits)-1]
			if last.Result != c.kind || last.Action != "mqtt.command" {
				t.Errorf("audit %+v; want result %q", last, c.kind)
			}
		})
	}
	if len(gw.saves) != 1 || len(gw.runs) != 0 || len(gw.writes) != 0 {
		t.Errorf("a refused command changed something: saves %+v runs %v writes %v", gw.saves, gw.runs, gw.writes)
	}
	if len(gw.audits) != len(cases)+1 {
		t.Errorf("%d audit records for %d commands", len(gw.audits), len(cases)+1)
	}
}

// TestCommand_StaleReplayAfterOutageRefused: a command replayed after a long
// outage (https://github.com/eclipse-paho/paho.mqtt.golang/issues/173), scaled
// (stale_after 3 s; the command was signed 6 s before it arrives after the
// outage): refused as stale, answered, nothing written.
func TestCommand_StaleReplayAfterOutageRefused(t *testing.T) {
	k := newKey(t, "sup-a")
	l, gw, ob := newTestLink(t, true, k)
	l.cfg.StaleAfter = 3 * time.Second
	signed := time.Now().Add(-6 * time.Second)
	l.handle(context.Background(), inbound{topic: CmdWrite, payload: k.sign(t, CmdWrite, "w1", signed, `{"writes":[{"path":"Plant/HR10","value":123}]}`)})
	r := ob.replies(t)["reply/w1"]
	if r.OK || r.Error == nil || r.Error.Kind != KindStale {
		t.Errorf("reply %+v; want stale", r)
	}
	if len(gw.writes) != 0 {
		t.Errorf("a stale command wrote %+v", gw.writes)
	}
}

func TestCommand_UnsignedAllowedWithoutRequireSignedIsAuditedAsSuch(t *testing.T) {
	k := newKey(t, "sup-a")
	l, gw, ob := newTestLink(t, false, k)
	l.handle(context.Background(), inbound{topic: CmdRun, payload: []byte(`{"id":"u1","key_id":"sup-a","ts":"` +
		time.Now().UTC().Format(time.RFC3339Nano) + `","body":{"entry":"pumps.start"}}`)})
	if r := ob.replies(t)["reply/u1"]; !r.OK {
		t.Fatalf("reply %+v", r)
	}
	if len(gw.runs) != 1 {
		t.Fatal("not run")
	}
	a := gw.audits[0]
	if after, _ := a.After.(map[string]any); after["require_signed"] != false || after["signed"] != false || !strings.Contains(a.Detail, "require_signed") {
		t.Errorf("audit %+v; want it marked unsigned", a)
	}
	if l.State().RequireSigned {
		t.Error("state does not show require_signed off")
	}
}

func TestCommand_BusyWhenQueueFull(t *testing.T) {
	k := newKey(t, "sup-a")
	l, _, ob := newTestLink(t, true, k)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.busyReplier(ctx)
	for i := range l.opts.Queue + 1 {
		id := "b" + itoa(i)
		l.onMessageIn(inbound{topic: CmdRun, payload: k.sign(t, CmdRun, id, time.Now(), `{"entry":"pumps.start"}`)})
	}
	deadline := time.Now().Add(5 * time.Second)
	last := "reply/b" + itoa(l.opts.Queue)
	for time.Now().Before(deadline) {
		if r, ok := ob.replies(t)[last]; ok {
			if r.OK || r.Error.Kind != KindBusy {
				t.Fatalf("reply %+v; want busy", r)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command over the queue was not answered busy")
}

func itoa(i int) string { return strconv.Itoa(i) }

// tamper flips one byte of the signature.
func tamper(p []byte) []byte {
	s := string(p)
	i := strings.Index(s, `"sig":"`) + len(`"sig":"`)
	sig, _ := base64.StdEncoding.DecodeString(s[i:strings.LastIndex(s, `"`)])
	sig[0] ^= 1
	return []byte(s[:i] + base64.StdEncoding.EncodeToString(sig) + `"}`)
}

// unsignedOf drops the sig key.
func unsignedOf(t *testing.T, p []byte) string {
	s := string(p)
	i := strings.Index(s, `,"sig":`)
	if i < 0 {
		t.Fatal("no sig")
	}
	return s[:i] + "}"
}
