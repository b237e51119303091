package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// TestEngine_FanOutBeyondOneNodeRun: a Python node returning 300 messages
// feeds a second Python node more messages than one node run takes
// (gateway.MaxNodeBatch); the second runs them all, in runs of at most
// that many, instead of failing every one.
func TestEngine_FanOutBeyondOneNodeRun(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: fan
  trigger: {tag: Line1/In}
  nodes:
    - {id: split, type: python, next: each, code: "def transform(msg):  # behave: fanout\n    return msg\n"}
    - {id: each, type: python, code: "def transform(msg):  # behave: echo\n    return msg\n"}
`)
	gw.change("Line1/In", 1.0, value.Good)
	st := waitStatus(t, e, "fan", "processed", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 1 })
	if st.Counters.Out != 300 || st.Counters.Errors != 0 {
		t.Fatalf("counters %+v last error %+v: want the 300 messages of the fan-out through the second node, no error", st.Counters, st.LastError)
	}
}

// TestEngine_CountersAddUpPastAFailedNode: messages behind a node that
// failed with on_error: fail are dropped and counted once: in = processed
// + dropped + queue, exactly, also in the batch where the node failed.
func TestEngine_CountersAddUpPastAFailedNode(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: cnt
  trigger: {tag: Line1/In}
  queue: 1000
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - {id: pass, type: filter, field: payload, above: -1, next: p}
    - {id: p, type: python, on_error: fail, next: w, code: "def transform(msg):  # behave: raise_on_odd\n    return msg\n"}
    - {id: w, type: tag_write, path: Line1/Out}
`, func(o *Options) { o.Batch = 64 })
	for _, v := range []int64{0, 2, 3, 4, 6, 8, 10, 12} {
		gw.change("Line1/In", v, value.Good)
	}
	st := waitStatus(t, e, "cnt", "all taken", func(st gateway.FlowStatus) bool {
		return st.Counters.In == 8 && st.Queue == 0 && st.State == gateway.FlowFailed
	})
	st = waitStatus(t, e, "cnt", "settled", func(st gateway.FlowStatus) bool { return st.Counters.Processed+st.Counters.Dropped >= 8 })
	c := st.Counters
	if c.In != c.Processed+c.Dropped+uint64(st.Queue) {
		t.Fatalf("counters %+v queue %d: in != processed + dropped + queue", c, st.Queue)
	}
	if c.Processed != 3 || c.Dropped != 5 || c.Errors != 1 || c.Out != 2 {
		t.Errorf("counters %+v: want 3 processed (two written, the failing one), 5 dropped behind the failed node", c)
	}
}

// TestEngine_OneFlowPerMessage: a message name is the trigger of one flow
// only. A second flow pushed on the same name is refused (409) and the
// messages keep going to the first; the project file may not name it
// twice either.
func TestEngine_OneFlowPerMessage(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: owner
  trigger: {message: go}
  grant: {scopes: [tag:read, tag:write], write_level: operate}
  nodes:
    - {id: w, type: tag_write, path: Line1/Out}
`)
	thief := []byte("trigger: {message: go}\nnodes:\n  - {id: e, type: end}\n")
	_, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "thief", Doc: thief})
	if !errors.Is(err, gateway.ErrConflict) || !strings.Contains(err.Error(), `message "go" is already the trigger of flow owner`) {
		t.Fatalf("second flow on message go: %v, want a conflict naming flow owner", err)
	}
	for i := range 20 {
		run, handled, err := e.DeliverMessage(context.Background(), designer, "go", json.RawMessage(fmt.Sprint(i)))
		if !handled || err != nil || !strings.Contains(string(run.Result), `"flow":"owner"`) {
			t.Fatalf("message %d: %s %v %v, want it queued for flow owner", i, run.Result, handled, err)
		}
	}
	// The owner itself may push a new version on its own name.
	if _, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "owner", Doc: []byte(`trigger: {message: go}
grant: {scopes: [tag:read, tag:write], write_level: operate}
nodes:
  - {id: w, type: tag_write, path: Line1/Out}
`)}); err != nil {
		t.Fatalf("new version of the owner: %v", err)
	}

	var nodes []yaml.Node
	if err := yaml.Unmarshal([]byte(`
- {name: a, trigger: {message: go}, nodes: [{id: e, type: end}]}
- {name: b, trigger: {message: go}, nodes: [{id: e, type: end}]}
`), &nodes); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSection("project.yaml", nodes, Env{}); err == nil || !strings.Contains(err.Error(), `flow "b": message "go" is already the trigger of flow "a"`) {
		t.Errorf("two project flows on one message: %v", err)
	}
}

// TestEngine_NarrowDesignerCannotRemoveAWiderFlow: a designer limited to
// Line2 at operate may not delete or reset a flow that writes under Line1
// (its grant does not cover the flow's, as for a save or a rollback); the
// flow keeps running. A push naming a version beyond the store's numbers
// is a 400, not a failure of the store.
func TestEngine_NarrowDesignerCannotRemoveAWiderFlow(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: plant
  trigger: {tag: Line1/In}
  grant: {scopes: [tag:read, tag:write], write_level: operate, prefixes: [Line1]}
  nodes:
    - {id: w, type: tag_write, path: Line1/Out, on_error: fail}
`)
	narrow := auth.Grant{Principal: "apikey:line2", Realm: auth.RealmAPIKey, Scopes: []auth.Scope{auth.TagRead, auth.TagWrite},
		WriteLevel: auth.LevelOperate, Permissions: []auth.Permission{auth.Designer}, Prefixes: []string{"Line2"}}
	var de *auth.DeniedError
	if _, err := e.DeleteFlow(context.Background(), narrow, "plant"); !errors.As(err, &de) {
		t.Fatalf("delete by a designer limited to Line2: %v, want a refusal naming what the flow has beyond", err)
	}
	if _, err := e.ResetFlow(context.Background(), narrow, "plant"); !errors.As(err, &de) {
		t.Fatalf("reset by a designer limited to Line2: %v, want a refusal", err)
	}
	if st, err := e.Flow(context.Background(), designer, "plant"); err != nil || st.State != gateway.FlowRunning {
		t.Fatalf("after the refusals: %+v %v, want it running", st, err)
	}
	_, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "plant", Version: 1 << 40,
		Doc: []byte("trigger: {tag: Line1/In}\nnodes: [{id: e, type: end}]\n")})
	if !errors.Is(err, gateway.ErrInvalid) {
		t.Errorf("version 2^40: %v, want ErrInvalid", err)
	}
	if _, err := e.DeleteFlow(context.Background(), designer, "plant"); err != nil {
		t.Fatalf("delete by a designer who covers it: %v", err)
	}
}

// TestCoverSection_EveryFlowsGrant: a project section whose flow asks for
// write level design is refused for an importer at operate, also when the
// flow fails to parse for another reason under the checking environment
// (an alarm trigger, which an Env without Alarms refuses, so ParseSection
// skips the flow and a check over its result passes).
func TestCoverSection_EveryFlowsGrant(t *testing.T) {
	var nodes []yaml.Node
	if err := yaml.Unmarshal([]byte(`
- name: fine
  trigger: {every: 1s}
  grant: {scopes: [tag:read, tag:write], write_level: operate, prefixes: [Line1]}
  nodes: [{id: e, type: end}]
- name: sneaky
  trigger: {alarm: Line1}
  grant: {scopes: [tag:read, tag:write, alarm:read], write_level: design, prefixes: [Line1]}
  nodes:
    - {id: w, type: tag_write, path: Line1/Sec/Design}
`), &nodes); err != nil {
		t.Fatal(err)
	}
	importer := auth.Grant{Principal: "apikey:des", Scopes: []auth.Scope{auth.TagRead, auth.TagWrite, auth.AlarmRead},
		WriteLevel: auth.LevelOperate, Permissions: []auth.Permission{auth.Designer}, Prefixes: []string{"Line1"}}
	if defs, _ := ParseSection("project.yaml", nodes, Env{}); len(defs) != 1 {
		t.Fatalf("ParseSection under an empty Env kept %d flows; this test needs it to skip sneaky", len(defs))
	}
	var de *auth.DeniedError
	err := CoverSection(importer, nodes)
	if !errors.As(err, &de) || !strings.Contains(err.Error(), `flow sneaky: cannot grant write level "design"`) {
		t.Fatalf("CoverSection: %v, want the design-level grant of flow sneaky refused", err)
	}
	if err := CoverSection(designer, nodes); err != nil {
		t.Errorf("an importer at design: %v", err)
	}
}

// TestEngine_MessageNestingLimit: a message nests at most 100 levels
// (docs/flows.md, "Limits"): a message payload deeper than that is refused
// at DeliverMessage (400), a Python node returning a deeper message fails
// with bad_return; messages at the limit pass.
func TestEngine_MessageNestingLimit(t *testing.T) {
	deep := func(levels int) string {
		return strings.Repeat("[", levels) + strings.Repeat("]", levels)
	}
	if n := nesting([]byte(`{"a": "[[[{{", "b": [1, {"c": "\"]"}]}`)); n != 3 {
		t.Fatalf("nesting of an object with brackets in strings: %d, want 3", n)
	}
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: deep
  trigger: {message: deep}
  nodes:
    - {id: p, type: python, code: "def transform(msg):  # behave: echo\n    return msg\n"}
`)
	if _, handled, err := e.DeliverMessage(context.Background(), designer, "deep", json.RawMessage(deep(150))); !handled || !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("payload 150 levels deep: handled %v err %v, want ErrInvalid", handled, err)
	}
	if _, _, err := e.DeliverMessage(context.Background(), designer, "deep", json.RawMessage(deep(99))); err != nil {
		t.Fatalf("payload 99 levels deep (the message 100): %v", err)
	}
	st := waitStatus(t, e, "deep", "the message at the limit ran", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 1 })
	if st.Counters.Out != 1 || st.Counters.Errors != 0 {
		t.Errorf("a message at the limit: counters %+v %+v", st.Counters, st.LastError)
	}
	if st.Counters.In != 1 {
		t.Errorf("the refused message was counted in: %+v", st.Counters)
	}
	if _, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "deep", Doc: []byte(
		"trigger: {message: deep}\nnodes:\n  - {id: p, type: python, code: \"def transform(msg):  # behave: deep\\n    return msg\\n\"}\n")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.DeliverMessage(context.Background(), designer, "deep", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, e, "deep", "the deep return failed", func(st gateway.FlowStatus) bool { return st.Counters.Processed == 2 })
	if st.Counters.Errors != 1 || st.LastError == nil || st.LastError.Kind != KindBadReturn || !strings.Contains(st.LastError.Message, "levels deep") {
		t.Errorf("a node returning a message 151 levels deep: counters %+v error %+v, want bad_return", st.Counters, st.LastError)
	}
}

// TestEngine_ReplacingAHeldFlowDoesNotHoldTheOthers: while a new version
// of one flow waits for its running version's batch (a node that does not
// return), saves, resets and deletions of other flows go on: the wait
// holds that flow only.
func TestEngine_ReplacingAHeldFlowDoesNotHoldTheOthers(t *testing.T) {
	gw := newFakeGW()
	e := testEngine(t, gw, `
- name: held
  trigger: {tag: Line1/In}
  nodes:
    - {id: n, type: python, code: "def transform(msg):  # behave: block\n    return msg\n"}
- name: other
  trigger: {tag: Line2/Other}
  nodes: [{id: e, type: end}]
`)
	gw.change("Line1/In", 1.0, value.Good)
	<-gw.blocked // the running version of held is inside its batch
	saved := make(chan error, 1)
	go func() {
		_, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "held",
			Doc: []byte("trigger: {tag: Line1/In}\nnodes: [{id: e, type: end}]\n")})
		saved <- err
	}()
	// Wait until the save of held is waiting for the batch (it holds the
	// flow's install lock), then the engine-wide lock must be free.
	fs := e.lookup("held")
	deadline := time.Now().Add(10 * time.Second)
	for fs.nextDef() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if fs.nextDef() == nil {
		t.Fatal("the save of held never reached its install")
	}
	if _, err := e.SaveFlow(context.Background(), designer, gateway.FlowSource{Name: "other",
		Doc: []byte("trigger: {tag: Line2/Other}\nnodes: [{id: e2, type: end}]\n")}); err != nil {
		t.Fatalf("save of other while held's save waits: %v", err)
	}
	if _, err := e.ResetFlow(context.Background(), designer, "other"); err != nil {
		t.Fatalf("reset of other: %v", err)
	}
	select {
	case err := <-saved:
		t.Fatalf("the save of held returned before its batch ended: %v", err)
	default:
	}
	close(gw.block)
	if err := <-saved; err != nil {
		t.Fatalf("save of held: %v", err)
	}
	if st, _ := e.Flow(context.Background(), designer, "held"); st.Version != 2 || st.State != gateway.FlowRunning {
		t.Errorf("held after its batch: %+v", st)
	}
}

// TestQueue_BoundedInBytes: a queue of 100,000 messages holds at most
// MaxQueueBytes of them: large messages beyond it drop the oldest
// (drop_oldest) or themselves (drop_newest), counted; a message larger
// than the whole limit is dropped, not queued.
func TestQueue_BoundedInBytes(t *testing.T) {
	big := func() *Msg {
		return newMsg(map[string]any{"payload": json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)})
	}
	for _, overflow := range []string{DropOldest, DropNewest} {
		q := newMsgQueue(MaxQueue, overflow)
		dropped := 0
		for range 200 {
			n, _ := q.push(big())
			dropped += n
		}
		n, _ := q.len()
		if q.bytes > MaxQueueBytes || n+dropped != 200 || n > MaxQueueBytes>>20 || dropped == 0 {
			t.Errorf("%s: %d queued holding %d bytes, %d dropped: want at most %d bytes, queued + dropped = 200", overflow, n, q.bytes, dropped, MaxQueueBytes)
		}
		for q.pop(64) != nil {
		}
		if q.bytes != 0 {
			t.Errorf("%s: an empty queue holds %d bytes", overflow, q.bytes)
		}
	}
	q := newMsgQueue(10, DropOldest)
	huge := newMsg(map[string]any{"payload": json.RawMessage(`"` + strings.Repeat("x", MaxQueueBytes) + `"`)})
	if n, queued := q.push(huge); n != 1 || queued {
		t.Errorf("a message over the whole limit: dropped %d queued %v", n, queued)
	}
}
