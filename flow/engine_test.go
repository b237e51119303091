package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// policyFlow is a flow whose Python node behaves as behave, with the error
// policy policy; route sends the failures to a log node.
func policyFlow(name, behave, policy string) string {
	errOut, alert := "", ""
	if policy == OnErrorRoute {
		errOut = "\n      error: alert"
		alert = "\n    - {id: alert, type: tag_write, path: Line1/In, field: error.kind, allow_bad_quality: true}"
	}
	return fmt.Sprintf(`
- name: %s
  trigger: {tag: Line1/In}
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - id: node
      type: python
      on_error: %s%s
      next: write
      code: |
        def transform(msg):  # behave: %s
            return msg
    - {id: write, type: tag_write, path: Line1/Out}%s
`, name, policy, errOut, behave, alert)
}

// TestEngine_ErrorPolicies: a node that raises, one that times out and one
// that returns garbage, under each policy: drop counts and goes on, route
// sends the message with the error attached (saying which failure) to the
// error output, fail stops the node until a reset.
func TestEngine_ErrorPolicies(t *testing.T) {
	for _, behave := range []string{"raise", "spin", "garbage"} {
		wantKind := map[string]string{"raise": KindException, "spin": KindTimeout, "garbage": KindBadReturn}[behave]
		for _, policy := range []string{OnErrorDrop, OnErrorRoute, OnErrorFail} {
			t.Run(behave+"/"+policy, func(t *testing.T) {
				gw := newFakeGW()
				e := testEngine(t, gw, policyFlow("f", behave, policy))
				gw.change("Line1/In", 1.0, value.Good)
				st := waitStatus(t, e, "f", "the message processed", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 1 })
				if st.Counters.Errors != 1 || st.LastError == nil || st.LastError.Kind != wantKind || st.LastError.Node != "node" {
					t.Fatalf("counters %+v last error %+v, want one %s error", st.Counters, st.LastError, wantKind)
				}
				if (behave == "spin") != (st.Counters.Timeouts == 1) {
					t.Errorf("timeouts %d", st.Counters.Timeouts)
				}
				if behave == "raise" && (st.LastError.Line != 3 || !strings.Contains(st.LastError.Message, "ValueError: bad input")) {
					t.Errorf("exception error %+v: want the exception and its line", st.LastError)
				}
				if behave == "garbage" && !strings.Contains(st.LastError.Message, "returned 42, which is not a message") {
					t.Errorf("garbage error %+v", st.LastError)
				}
				gw.mu.Lock()
				writes := append([]gateway.TagWrite(nil), gw.writes...)
				gw.mu.Unlock()
				switch policy {
				case OnErrorDrop:
					if len(writes) != 0 || st.State != gateway.FlowRunning || st.Counters.Out != 0 {
						t.Errorf("drop: writes %v state %s out %d", writes, st.State, st.Counters.Out)
					}
				case OnErrorRoute:
					if len(writes) != 1 || writes[0].Path != "Line1/In" || writes[0].Value != wantKind {
						t.Errorf("route: writes %+v, want the error's kind %q written by the error branch", writes, wantKind)
					}
					if st.State != gateway.FlowRunning || st.Counters.Out != 1 {
						t.Errorf("route: state %s out %d", st.State, st.Counters.Out)
					}
				case OnErrorFail:
					if len(writes) != 0 || st.State != gateway.FlowFailed || !strings.Contains(st.Reason, "node node failed: "+wantKind) {
						t.Fatalf("fail: writes %v state %s reason %q", writes, st.State, st.Reason)
					}
					if h := e.FlowHealth()["f"]; h.State != gateway.FlowFailed {
						t.Errorf("health %+v", h)
					}
					gw.change("Line1/In", 2.0, value.Good)
					st = waitStatus(t, e, "f", "the second message", func(st gateway.FlowStatus) bool { return st.Counters.Processed+st.Counters.Dropped == 2 })
					if st.Counters.Processed != 1 || st.Counters.Dropped != 1 || st.Counters.Errors != 1 {
						t.Errorf("a message reaching the failed node: counters %+v, want it dropped (counted), not run", st.Counters)
					}
					st, err := e.ResetFlow(context.Background(), designer, "f")
					if err != nil || st.State != gateway.FlowRunning {
						t.Fatalf("reset: %+v %v", st, err)
					}
					gw.change("Line1/In", 3.0, value.Good)
					st = waitStatus(t, e, "f", "the node runs again", func(st gateway.FlowStatus) bool { return st.Counters.Errors == 2 })
					if st.Nodes[0].Runs != 2 {
						t.Errorf("node runs %d after the reset, want 2", st.Nodes[0].Runs)
					}
					if acts := strings.Join(gw.auditActions(), ","); !strings.Contains(acts, "flow.node_failed") || !strings.Contains(acts, "flow.reset") {
						t.Errorf("audit %s", acts)
					}
				}
			})
		}
	}
}

// TestEngine_TagTrigger_MessageAndQuality: the message carries value,
// quality, timestamp and the previous VQT; a Bad value reaches the node as
// Bad (and is not written); with only_good it is skipped and counted.
func TestEngine_TagTrigger_MessageAndQuality(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: all
  trigger: {tag: Line1/In}
  grant: {scopes: [tag:read, tag:write, script:execute], write_level: operate}
  nodes:
    - {id: scale, type: python, next: w, code: "def transform(msg):  # behave: scale\n    return msg\n"}
    - {id: w, type: tag_write, path: Line1/Out, on_error: route, error: seen}
    - {id: seen, type: message, handler: bad_seen}
- name: good-only
  trigger: {tag: Line1/In}
  only_good: true
  nodes:
    - {id: n, type: python, code: "def transform(msg):  # behave: echo\n    return msg\n"}
`)
	gw.change("Line1/In", int64(100), value.Good)
	waitStatus(t, e, "all", "first", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 1 })
	gw.change("Line1/In", nil, value.BadNotConnected)
	st := waitStatus(t, e, "all", "second", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 2 })
	if gw.writeCount() != 1 || st.Counters.Errors != 1 || st.LastError.Kind != KindBadQuality {
		t.Errorf("the Bad value: writes %d, counters %+v, last error %+v; want it not written (bad_quality)", gw.writeCount(), st.Counters, st.LastError)
	}
	gw.mu.Lock()
	w := gw.writes[0]
	sent := append([]string(nil), gw.sent...)
	gw.mu.Unlock()
	if fmt.Sprint(w.Value) != "13" || w.Path != "Line1/Out" {
		t.Errorf("write %+v, want 100*0.1+3 to Line1/Out", w)
	}
	if len(sent) != 1 {
		t.Fatalf("messages sent %v", sent)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(sent[0], "bad_seen ")), &m); err != nil {
		t.Fatal(err)
	}
	prev, _ := m["previous"].(map[string]any)
	if m["quality"] != "Bad_NotConnected" || m["path"] != "Line1/In" || m["trigger"] != "tag" || m["seq"] != 2.0 ||
		prev["quality"] != "Good" || prev["value"] != 100.0 || m["timestamp"] == nil {
		t.Errorf("the Bad message reaching the node: %v", m)
	}
	g := waitStatus(t, e, "good-only", "skipped", func(st gateway.FlowStatus) bool { return st.Counters.Filtered == 1 && st.Counters.Processed >= 1 })
	if g.Counters.Processed != 1 || g.Counters.In != 1 || g.Nodes[0].Runs != 1 {
		t.Errorf("only_good: %+v, nodes %+v; want the Bad change skipped before the node", g.Counters, g.Nodes)
	}
}

// TestEngine_BurstIntoSmallQueue: 10,000 changes into a queue of 100
// while the node is held: every change is either processed or dropped,
// counted exactly, and the feed never blocks the one sending them.
func TestEngine_BurstIntoSmallQueue(t *testing.T) {
	for _, overflow := range []string{DropOldest, DropNewest} {
		t.Run(overflow, func(t *testing.T) {
			gw := newFakeGW()
			e := testEngine(t, gw, `
- name: burst
  trigger: {tag: Line1/In}
  queue: 100
  overflow: `+overflow+`
  nodes:
    - {id: n, type: python, code: "def transform(msg):  # behave: block\n    return msg\n"}
`, func(o *Options) { o.Batch = 1 })
			gw.change("Line1/In", int64(0), value.Good)
			<-gw.blocked // the node holds the first message
			start := time.Now()
			for i := 1; i < 10_000; i++ {
				gw.change("Line1/In", int64(i), value.Good)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("sending 10,000 changes took %s: the feed blocked", d)
			}
			waitStatus(t, e, "burst", "all offered", func(st gateway.FlowStatus) bool { return st.Counters.In == 10_000 })
			close(gw.block)
			st := waitStatus(t, e, "burst", "drained", func(st gateway.FlowStatus) bool {
				return st.Queue == 0 && st.Counters.Processed+st.Counters.Dropped == 10_000
			})
			if st.Counters.Processed != 101 || st.Counters.Dropped != 9_899 {
				t.Errorf("counters %+v: want 101 processed (the held one and a full queue), 9,899 dropped", st.Counters)
			}
			if gw.lost != 0 {
				t.Errorf("the feed lost %d", gw.lost)
			}
		})
	}
}

// TestEngine_NewVersionKeepsQueuedMessages: a version pushed while
// messages wait takes them over, in order; a smaller queue says how many
// it dropped.
func TestEngine_NewVersionKeepsQueuedMessages(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: v
  trigger: {tag: Line1/In}
  queue: 50
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - {id: n, type: python, next: w, code: "def transform(msg):  # behave: block\n    return msg\n"}
    - {id: w, type: tag_write, path: Line1/Out}
`, func(o *Options) { o.Batch = 1 })
	gw.change("Line1/In", int64(0), value.Good)
	<-gw.blocked
	for i := 1; i <= 30; i++ {
		gw.change("Line1/In", int64(i), value.Good)
	}
	waitStatus(t, e, "v", "queued", func(st gateway.FlowStatus) bool { return st.Queue == 30 })
	v2 := `
name: v
trigger: {tag: Line1/In}
queue: 20
grant: {scopes: [tag:read, tag:write], write_level: operate}
nodes:
  - {id: n, type: python, next: w, code: "def transform(msg):  # behave: scale\n    return msg\n"}
  - {id: w, type: tag_write, path: Line1/Out}
`
	saved := make(chan gateway.FlowSaved, 1)
	go func() {
		s, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "v", Doc: []byte(v2)})
		if err != nil {
			t.Errorf("save: %v", err)
		}
		saved <- s
	}()
	time.Sleep(50 * time.Millisecond)
	close(gw.block) // the old version finishes its message, then the new one takes over
	s := <-saved
	if s.Version != 2 || s.Carried != 20 || s.Dropped != 10 {
		t.Fatalf("saved %+v, want version 2 carrying 20 and dropping the 10 oldest", s)
	}
	st := waitStatus(t, e, "v", "drained", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 21 })
	if st.Counters.Dropped != 10 || st.Version != 2 {
		t.Errorf("status %+v", st)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var got []string
	for _, w := range gw.writes {
		got = append(got, fmt.Sprint(w.Value))
	}
	// Message 0 by version 1 (unchanged); 11..30 by version 2 (scaled), in order.
	want := []string{"0"}
	for i := 11; i <= 30; i++ {
		want = append(want, fmt.Sprint(float64(i)*0.1+3))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writes %v\nwant %v", got, want)
	}
	if len(gw.released) == 0 {
		t.Error("the old version's node was not released")
	}
}

// TestEngine_GrantWithoutWrite: a Python node whose flow has no tag:write
// cannot write; a push of a flow wider than its designer is refused.
func TestEngine_Grants(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, "")
	narrow := auth.Grant{Principal: "d2", Realm: auth.RealmAPIKey, Scopes: []auth.Scope{auth.TagRead, auth.TagWrite},
		WriteLevel: auth.LevelOperate, Permissions: []auth.Permission{auth.Designer}, Prefixes: []string{"Line1"}}
	wide := `
name: wide
trigger: {tag: Line1/In}
grant: {scopes: [tag:read, tag:write], write_level: supervise}
nodes: [{id: w, type: tag_write, path: Line1/Guarded}]`
	_, err := e.SaveFlow(context.Background(), narrow, gateway.FlowSource{Name: "wide", Doc: []byte(wide)})
	var de *auth.DeniedError
	if !errors.As(err, &de) || de.Kind != "wider" || !strings.Contains(err.Error(), `write level "supervise"`) {
		t.Fatalf("a flow wider than its designer: %v", err)
	}
	everyPath := `
name: paths
trigger: {tag: Line1/In}
grant: {scopes: [tag:read]}
nodes: [{id: e, type: end}]`
	if _, err := e.SaveFlow(context.Background(), narrow, gateway.FlowSource{Name: "paths", Doc: []byte(everyPath)}); !errors.As(err, &de) ||
		!strings.Contains(err.Error(), "every tag path") {
		t.Errorf("a flow without prefixes from a designer with prefixes: %v", err)
	}
	ok := `
name: ok
trigger: {tag: Line1/In}
grant: {scopes: [tag:read, tag:write], write_level: operate, prefixes: [Line1]}
nodes: [{id: w, type: tag_write, path: Line1/Out}]`
	if s, err := e.SaveFlow(context.Background(), narrow, gateway.FlowSource{Name: "ok", Doc: []byte(ok)}); err != nil || s.Version != 1 {
		t.Fatalf("a covered flow: %+v %v", s, err)
	}
	gw.change("Line1/In", 5.0, value.Good)
	waitStatus(t, e, "ok", "written", func(st gateway.FlowStatus) bool { return st.Counters.Out == 1 })
	gw.mu.Lock()
	g := gw.grants[0]
	gw.mu.Unlock()
	if g.Principal != "flow:ok" || g.Realm != RealmFlow || g.Origin != "flow:ok" || g.Prefixes[0] != "Line1" || len(g.Permissions) != 0 {
		t.Errorf("the write's grant %+v, want the flow's own", g)
	}
}

// TestEngine_MessageTrigger: system.message.send reaches the flow; a
// sender whose grant does not cover the flow's is refused.
func TestEngine_MessageTrigger(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: on-done
  trigger: {message: batch_finished}
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - {id: w, type: tag_write, path: Line1/Out, field: payload.count}
`)
	if got := e.MessageHandlers(); len(got) != 1 || got[0] != "batch_finished" {
		t.Errorf("handlers %v", got)
	}
	op := auth.Grant{Principal: "op", Realm: auth.RealmOperator, Scopes: []auth.Scope{auth.TagRead, auth.TagWrite, auth.ScriptExecute},
		WriteLevel: auth.LevelOperate}
	run, handled, err := e.DeliverMessage(context.Background(), op, "batch_finished", json.RawMessage(`{"count": 7}`))
	if !handled || err != nil || !strings.Contains(string(run.Result), `"queued":true`) {
		t.Fatalf("%s %v %v", run.Result, handled, err)
	}
	waitStatus(t, e, "on-done", "written", func(st gateway.FlowStatus) bool { return st.Counters.Out == 1 })
	if gw.writes[0].Value != int64(7) {
		t.Errorf("write %+v", gw.writes[0])
	}
	reader := auth.Grant{Principal: "kiosk", Scopes: []auth.Scope{auth.TagRead, auth.ScriptExecute}, WriteLevel: auth.LevelView}
	if _, handled, err := e.DeliverMessage(context.Background(), reader, "batch_finished", nil); !handled || err == nil ||
		!strings.Contains(err.Error(), `cannot grant scope "tag:write"`) {
		t.Errorf("a sender who may not write: %v %v", handled, err)
	}
	if _, handled, _ := e.DeliverMessage(context.Background(), op, "nobody", nil); handled {
		t.Error("an unknown name was handled")
	}
}

// TestEngine_OrderAcrossBranches: messages of one trigger reach each node
// in their order, also where two branches meet.
func TestEngine_OrderAcrossBranches(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: order
  trigger: {tag: Line1/In}
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - {id: p, type: python, on_error: route, error: w, next: w, code: "def transform(msg):  # behave: raise_on_odd\n    return msg\n"}
    - {id: w, type: tag_write, path: Line1/Out, field: seq, allow_bad_quality: true}
`, func(o *Options) { o.Batch = 64 })
	for i := range 40 {
		gw.change("Line1/In", int64(i), value.Good)
	}
	waitStatus(t, e, "order", "done", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 40 })
	gw.mu.Lock()
	defer gw.mu.Unlock()
	for i, w := range gw.writes {
		if w.Value != int64(i+1) {
			t.Fatalf("write %d has seq %v: out of order (%v)", i, w.Value, gw.writes)
		}
	}
}

// TestEngine_TimerAndLinks: a timer trigger; an mqtt trigger and an
// mqtt_publish node through the link's interfaces; an alarm trigger
// selecting transitions.
func TestEngine_TimerAndLinks(t *testing.T) {
	gw := newFakeGW()
	topics := &fakeTopics{}
	alarms := &fakeAlarms{}
	e := testEngine(t, gw, `
- name: tick
  trigger: {every: 20ms}
  nodes: [{id: e, type: end}]
- name: cmd
  trigger: {mqtt: "plant/+/cmd"}
  nodes:
    - {id: p, type: python, next: pub, code: "def transform(msg):  # behave: echo\n    return msg\n"}
    - {id: pub, type: mqtt_publish, topic: plant/ack, field: payload, retain: true}
- name: high-alarms
  grant: {scopes: [tag:read, alarm:read]}
  trigger: {alarm: {source: Line1, priority: [high, critical], to: [active_unacked]}}
  nodes:
    - {id: pub, type: mqtt_publish, topic: alerts, field: alarm.id}
`, func(o *Options) { o.Topics, o.Publisher, o.Alarms = topics, topics, alarms })
	waitStatus(t, e, "tick", "ticks", func(st gateway.FlowStatus) bool { return st.Counters.Out >= 3 })
	topics.mu.Lock()
	ch := topics.subs["plant/+/cmd"]
	topics.mu.Unlock()
	ch <- TopicMessage{Topic: "plant/p1/cmd", Payload: []byte(`{"start": true}`), Time: time.Now()}
	waitStatus(t, e, "cmd", "published", func(st gateway.FlowStatus) bool { return st.Counters.Out == 1 })
	for _, at := range []AlarmTransition{
		{ID: "Line1/Tank/Level:High", Source: "Line1/Tank/Level", Priority: "high", From: "normal", To: "active_unacked", Quality: value.Good},
		{ID: "Line1/Tank/Level:Low", Source: "Line1/Tank/Level", Priority: "low", From: "normal", To: "active_unacked", Quality: value.Good},
		{ID: "Line10/X:High", Source: "Line10/X", Priority: "high", From: "normal", To: "active_unacked", Quality: value.Good},
		{ID: "Line1/Tank/Level:High", Source: "Line1/Tank/Level", Priority: "high", From: "active_unacked", To: "active_acked", Quality: value.Good},
	} {
		alarms.send(at)
	}
	waitStatus(t, e, "high-alarms", "one selected", func(st gateway.FlowStatus) bool { return st.Counters.Out == 1 })
	time.Sleep(50 * time.Millisecond)
	topics.mu.Lock()
	defer topics.mu.Unlock()
	want := []string{`plant/ack {"start":true} retain=true by flow:cmd`, `alerts "Line1/Tank/Level:High" retain=false by flow:high-alarms`}
	if fmt.Sprint(topics.published) != fmt.Sprint(want) {
		t.Errorf("published %q\nwant %q", topics.published, want)
	}
}

// TestEngine_VersionsAndRollback: pushes number the versions; a replayed
// version is refused; rollback runs the one before; code the sandbox
// refuses leaves the running version as it is.
func TestEngine_VersionsAndRollback(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, "")
	doc := func(behave string) []byte {
		return []byte(fmt.Sprintf(`
trigger: {tag: Line1/In}
grant: {scopes: [tag:read, tag:write], write_level: operate}
nodes:
  - {id: p, type: python, next: w, code: "def transform(msg):  # behave: %s\n    return msg\n"}
  - {id: w, type: tag_write, path: Line1/Out}
`, behave))
	}
	ctx := context.Background()
	if s, err := e.SaveFlow(ctx, designer, gateway.FlowSource{Name: "f", Doc: doc("echo")}); err != nil || s.Version != 1 {
		t.Fatal(s, err)
	}
	if s, err := e.SaveFlow(ctx, designer, gateway.FlowSource{Name: "f", Doc: doc("scale"), Version: 5}); err != nil || s.Version != 5 {
		t.Fatal(s, err)
	}
	if _, err := e.SaveFlow(ctx, designer, gateway.FlowSource{Name: "f", Doc: doc("echo"), Version: 5}); !errors.Is(err, gateway.ErrConflict) {
		t.Errorf("a replayed version: %v", err)
	}
	if _, err := e.SaveFlow(ctx, designer, gateway.FlowSource{Name: "f", Doc: []byte("trigger: {tag: Line1/In}\nnodes: [{id: p, type: python, code: \"def transform(msg):  # refuse\\n    return msg\\n\"}]\n")}); err == nil ||
		!strings.Contains(err.Error(), "forbidden name") {
		t.Errorf("refused code: %v", err)
	}
	if st, _ := e.Flow(ctx, designer, "f"); st.Version != 5 {
		t.Errorf("after refused code the running version is %d, want 5", st.Version)
	}
	gw.change("Line1/In", 10.0, value.Good)
	waitStatus(t, e, "f", "v5 ran", func(st gateway.FlowStatus) bool { return st.Counters.Out == 1 })
	s, err := e.RollbackFlow(ctx, designer, "f")
	if err != nil || s.Version != 1 {
		t.Fatalf("rollback %+v %v", s, err)
	}
	gw.change("Line1/In", 20.0, value.Good)
	waitStatus(t, e, "f", "v1 ran", func(st gateway.FlowStatus) bool { return st.Counters.Out == 2 })
	gw.mu.Lock()
	got := fmt.Sprint(gw.writes[0].Value, " ", gw.writes[1].Value)
	gw.mu.Unlock()
	if got != "4 20" {
		t.Errorf("writes %s, want 4 (v5 scaled 10) then 20 (v1 echoes)", got)
	}
	if _, err := e.RollbackFlow(ctx, designer, "f"); !errors.Is(err, gateway.ErrConflict) {
		t.Errorf("rollback of the only version: %v", err)
	}
	vs, err := e.FlowVersions(ctx, designer, "f")
	if err != nil || len(vs) != 1 || vs[0].Version != 1 || vs[0].Principal != "designer" {
		t.Errorf("versions %+v %v", vs, err)
	}
	if d, err := e.FlowDefinition(ctx, designer, "f", 1); err != nil || !strings.Contains(string(d), "behave: echo") {
		t.Errorf("definition %s %v", d, err)
	}
	if _, err := e.DeleteFlow(ctx, designer, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Flow(ctx, designer, "f"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	acts := strings.Join(gw.auditActions(), ",")
	for _, a := range []string{"flow.save", "flow.rollback", "flow.delete"} {
		if !strings.Contains(acts, a) {
			t.Errorf("audit %s lacks %s", acts, a)
		}
	}
}

// TestEngine_ProjectFlowsSavedOnce: a project flow is stored as version 1
// at the first start and not again while it is unchanged.
func TestEngine_ProjectFlowsSavedOnce(t *testing.T) {
	gw := newFakeGW()
	st := newMemStore()
	src := `
- name: p
  trigger: {every: 1h}
  nodes: [{id: e, type: end}]`
	for range 2 {
		e := testEngine(t, gw, src, func(o *Options) { o.Store = st })
		_ = e.Stop(context.Background())
	}
	if vs, _, _ := st.FlowVersions("p"); len(vs) != 1 {
		t.Errorf("versions %v after two starts, want 1", vs)
	}
}

// TestEngine_TagFeedOnlyWithTagTriggers: the engine subscribes to the tag
// changes only while a running flow has a tag trigger, and lets go when
// the last such flow is deleted; changes reach the flow meanwhile.
func TestEngine_TagFeedOnlyWithTagTriggers(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, "")
	if n := gw.subscriptions(); n != 0 {
		t.Fatalf("no flow: %d subscriptions to the tag changes, want 0", n)
	}
	doc := `
name: f
trigger: {tag: Line1/In}
nodes:
  - {id: n, type: python, code: "def transform(msg):  # behave: echo\n    return msg\n"}
`
	if _, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "f", Doc: []byte(doc)}); err != nil {
		t.Fatal(err)
	}
	if n := gw.subscriptions(); n != 1 {
		t.Fatalf("a tag trigger: %d subscriptions, want 1", n)
	}
	gw.change("Line1/In", int64(1), value.Good)
	waitStatus(t, e, "f", "processed", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 1 })
	if _, err := e.DeleteFlow(context.Background(), designer, "f"); err != nil {
		t.Fatal(err)
	}
	if n := gw.subscriptions(); n != 0 {
		t.Fatalf("the flow deleted: %d subscriptions, want 0", n)
	}
}

// TestEngine_PushedFlowSurvivesRestart: the project's definition of a flow
// is saved at start only when it changed since the project last saved it:
// a version pushed since keeps running across restarts, and an edited
// project definition is the next version (docs/flows.md, "Versions and
// rollback").
func TestEngine_PushedFlowSurvivesRestart(t *testing.T) {
	st := newMemStore()
	shared := func(o *Options) { o.Store = st }
	project := func(behave string) string {
		return fmt.Sprintf(`
- name: f
  trigger: {tag: Line1/In}
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - {id: p, type: python, next: w, code: "def transform(msg):  # behave: %s\n    return msg\n"}
    - {id: w, type: tag_write, path: Line1/Out}
`, behave)
	}
	ctx := context.Background()
	life := func(flows string, fn func(e *Engine)) {
		t.Helper()
		e := testEngine(t, newFakeGW(), flows, shared)
		fn(e)
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	version := func(e *Engine) int64 {
		t.Helper()
		s, err := e.Flow(ctx, designer, "f")
		if err != nil {
			t.Fatal(err)
		}
		return s.Version
	}
	life(project("file"), func(e *Engine) {
		pushed := []byte("trigger: {tag: Line1/In}\ngrant: {scopes: [tag:read, tag:write], write_level: operate}\n" +
			"nodes:\n  - {id: p, type: python, next: w, code: \"def transform(msg):  # behave: pushed\\n    return msg\\n\"}\n  - {id: w, type: tag_write, path: Line1/Out}\n")
		if s, err := e.SaveFlow(ctx, designer, gateway.FlowSource{Name: "f", Doc: pushed}); err != nil || s.Version != 2 {
			t.Fatalf("push: %+v %v", s, err)
		}
	})
	life(project("file"), func(e *Engine) {
		if v := version(e); v != 2 {
			t.Errorf("after a restart with the project unchanged, version %d runs, want the pushed 2", v)
		}
	})
	life(project("edited"), func(e *Engine) {
		if v := version(e); v != 3 {
			t.Errorf("after the project's definition was edited, version %d runs, want 3", v)
		}
	})
}

// TestEngine_RefusedNodeStopsTheFlowSayingWhere: a stored flow whose
// Python node the sandbox refuses at start is stopped, its reason the
// refusal as the service words it (the flow, its stored version, the node,
// the line in its code:), not wrapped in a second "flow ...: node ...:"
// nor prefixed with the kind.
func TestEngine_RefusedNodeStopsTheFlowSayingWhere(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: scale-speed2
  trigger: {tag: Line1/In}
  nodes:
    - {id: scale, type: python, code: "def transform(msg):  # refuse\n    return msg\n"}
`)
	st, err := e.Flow(context.Background(), designer, "scale-speed2")
	if err != nil {
		t.Fatal(err)
	}
	want := `flow "scale-speed2" version 1, node "scale": forbidden name (line 2, column 1, counted in the node's code:)`
	if st.State != gateway.FlowStopped || st.Reason != want {
		t.Errorf("state %s, reason %q; want stopped, %q", st.State, st.Reason, want)
	}
}
