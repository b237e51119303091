package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
)

// TestNodes_PrepareAndRun: a node's code is checked (transform required,
// the guardrail's refusals), registered under a module no script can
// name, and runs a batch on a worker with one result per message; a
// failure names "the node", not its module.
func TestNodes_PrepareAndRun(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, withStoredProject(t, testOptions(t, dir), "devices: []\n"))
	ctx := context.Background()
	for _, st := range s.Steps() {
		if st.Name == "sandbox" {
			if err := st.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Stop(context.Background()) })
		}
	}
	var nodes gateway.Nodes = s
	p, err := nodes.PrepareNode(ctx, gateway.NodeCode{Flow: "scale", Node: "py", Version: 3,
		Code: "def transform(msg):\n    if msg['payload'] == 0:\n        raise ValueError('zero')\n    if msg['payload'] < 0:\n        while True:\n            pass\n    msg['payload'] = msg['payload'] * 2\n    return msg\n"})
	if err != nil || p.Ref != "flow.scale.py.3" {
		t.Fatalf("prepare: %+v %v", p, err)
	}
	if err := gateway.CheckName("module", p.Ref); err == nil {
		t.Errorf("a node's module %q is a valid script module name: REST could run it", p.Ref)
	}
	if _, err := nodes.PrepareNode(ctx, gateway.NodeCode{Flow: "f", Node: "n", Version: 1, Code: "def other(msg):\n    return msg\n"}); err == nil ||
		!strings.Contains(err.Error(), "defines no transform(msg)") {
		t.Errorf("code without transform: %v", err)
	}
	_, err = nodes.PrepareNode(ctx, gateway.NodeCode{Flow: "f", Node: "n", Version: 1, FlowVersion: 7, Code: "import os\ndef transform(msg):\n    return msg\n"})
	if se := (*gateway.ScriptError)(nil); !errors.As(err, &se) || se.Kind != gateway.KindInvalid ||
		!strings.HasPrefix(se.Detail, `flow "f" version 7, node "n": `) || !strings.Contains(se.Detail, "(line 1, column 1, counted in the node's code:)") ||
		strings.Count(se.Detail, "line") != 1 || strings.Contains(se.Detail, "flow.f.") {
		t.Errorf("import os: %v; want invalid naming the flow, its version, the node and the line once, not the module", err)
	}
	g := auth.Grant{Principal: "flow:scale", Realm: "flow", Origin: "flow:scale", Scopes: []auth.Scope{auth.TagRead}}
	msgs := []json.RawMessage{[]byte(`{"payload": 2}`), []byte(`{"payload": 0}`), []byte(`{"payload": 5}`)}
	res, err := nodes.RunNode(ctx, g, gateway.NodeRun{Module: p.Ref, Entry: "transform", Msgs: msgs, Timeout: 2 * time.Second})
	if err != nil || len(res) != 3 {
		t.Fatalf("run: %+v %v", res, err)
	}
	if string(res[0].Value) != `{"payload":4}` || string(res[2].Value) != `{"payload":10}` {
		t.Errorf("results %s %s", res[0].Value, res[2].Value)
	}
	if e := res[1].Err; e == nil || e.Kind != gateway.KindScriptError || e.Detail != "ValueError: zero" || res[1].Line != 3 {
		t.Errorf("the raising message: %+v line %d", e, res[1].Line)
	}
	res, err = nodes.RunNode(ctx, g, gateway.NodeRun{Module: p.Ref, Entry: "transform", Msgs: []json.RawMessage{[]byte(`{"payload": -1}`), []byte(`{"payload": 1}`)},
		Timeout: 300 * time.Millisecond})
	if err != nil || len(res) != 1 || res[0].Err == nil || res[0].Err.Kind != gateway.KindTimeout ||
		res[0].Err.Detail != "the node ran past its timeout of 300ms and was killed" {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	nodes.ReleaseNode(p.Ref)
	if _, err := nodes.RunNode(ctx, g, gateway.NodeRun{Module: p.Ref, Entry: "transform", Msgs: msgs[:1]}); gateway.Kind(err) != gateway.KindNotFound {
		t.Errorf("a released node ran: %v, want not_found (its module is gone)", err)
	}
}

type fakeSink struct {
	got []string
}

func (f *fakeSink) MessageHandlers() []string { return []string{"batch_finished"} }

func (f *fakeSink) DeliverMessage(_ context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, bool, error) {
	if handler != "batch_finished" {
		return gateway.ScriptRun{}, false, nil
	}
	f.got = append(f.got, g.Principal+" "+string(payload))
	return gateway.ScriptRun{Result: json.RawMessage(`{"flow":"f","queued":true}`)}, true, nil
}

type fakeFlowHealth map[string]gateway.FlowHealth

func (f fakeFlowHealth) FlowHealth() map[string]gateway.FlowHealth { return f }

// TestFlows_MessagesAndHealth: a message no project handler takes goes to
// the flows; an unknown one lists the flows' names too; a failed flow
// degrades health, naming it.
func TestFlows_MessagesAndHealth(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, withStoredProject(t, testOptions(t, dir), "devices: []\n"))
	startEngine(t, s)
	sink := &fakeSink{}
	s.RouteMessages(sink)
	op := auth.Grant{Principal: "op", Scopes: []auth.Scope{auth.ScriptExecute}}
	run, err := s.SendMessage(context.Background(), op, "batch_finished", json.RawMessage(`{"n":1}`))
	if err != nil || string(run.Result) != `{"flow":"f","queued":true}` || len(sink.got) != 1 || sink.got[0] != `op {"n":1}` {
		t.Fatalf("%s %v %v", run.Result, err, sink.got)
	}
	if _, err := s.SendMessage(context.Background(), op, "nobody", nil); !errors.Is(err, gateway.ErrNotFound) || !strings.Contains(err.Error(), "batch_finished") {
		t.Errorf("unknown handler: %v", err)
	}
	s.SetFlowHealth(fakeFlowHealth{"scale": {State: gateway.FlowFailed, Reason: "node py failed: timeout"}, "ok": {State: gateway.FlowRunning}})
	h := s.Health(context.Background())
	if h.Status != gateway.HealthDegraded || h.Flows["scale"].State != gateway.FlowFailed || !strings.Contains(strings.Join(h.Reasons, "|"), `flow "scale" failed: node py failed: timeout`) {
		t.Errorf("health %+v", h)
	}
}

// TestNodeRefusal_NamesTheFlowVersionNodeAndLineOnce: a node's refused
// check names the flow, its version and the node as the flow file does,
// the first error at its line and column in the node's code:, how many
// more there are; never the internal module, the location once.
func TestNodeRefusal_NamesTheFlowVersionNodeAndLineOnce(t *testing.T) {
	diags := []sandbox.Diagnostic{
		{Line: 1, Column: 1, Severity: "warning", Message: "unused"},
		{Line: 2, Column: 8, Severity: "error", Message: "module 'os' is not available"},
		{Line: 4, Column: 1, Severity: "error", Message: "name 'open' is not available"},
	}
	err := nodeRefusal(gateway.NodeCode{Flow: "scale-speed2", Node: "scale", Version: 3, FlowVersion: 2}, diags,
		&sandbox.RunError{Kind: gateway.KindInvalid, Detail: "module flow.scale-speed2.scale.3 refused: module 'os' is not available (line 2, column 8)", Line: 2})
	want := `flow "scale-speed2" version 2, node "scale": module 'os' is not available (line 2, column 8, counted in the node's code:) and 1 more problems`
	if se := (*gateway.ScriptError)(nil); !errors.As(err, &se) || se.Kind != gateway.KindInvalid || se.Detail != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	if err := nodeRefusal(gateway.NodeCode{Flow: "f", Node: "n"}, nil, &sandbox.RunError{Kind: gateway.KindRuntimeMissing, Detail: "no python"}); gateway.Kind(err) != gateway.KindRuntimeMissing {
		t.Errorf("a failure that is no diagnostic: %v", err)
	}
}

// TestScriptError_SaysTheLocationOnce: a refused check's detail already
// names its line and column, so no second "(line N)" is appended; a run's
// exception gets its line.
func TestScriptError_SaysTheLocationOnce(t *testing.T) {
	for re, want := range map[*sandbox.RunError]string{
		{Kind: gateway.KindInvalid, Detail: "module pumps refused: module 'os' is not available (line 1, column 1)", Line: 1}: "module pumps refused: module 'os' is not available (line 1, column 1)",
		{Kind: gateway.KindScriptError, Detail: "ValueError: zero", Line: 3}:                                                  "ValueError: zero (line 3)",
	} {
		var se *gateway.ScriptError
		if err := scriptError(re); !errors.As(err, &se) || se.Detail != want {
			t.Errorf("got %v; want %q", err, want)
		}
	}
}
