package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// fakeGW is the service layer for the engine's unit tests. Python nodes
// "run" by the behaviour their code names in a comment "# behave: NAME"
// (behaviours); the real sandbox runs them in the integration tests.
type fakeGW struct {
	mu       sync.Mutex
	tags     map[string]gateway.TagInfo
	writes   []gateway.TagWrite
	grants   []auth.Grant // of the writes
	audits   []gateway.AuditEvent
	sent     []string
	prepared map[string]string // ref → code
	released []string
	subs     []chan gateway.TagValue
	wants    []func(string) bool // each sub's filter
	lost     uint64
	block    chan struct{} // behaviour "block" waits for it
	blocked  chan struct{}
	runs     int
}

func newFakeGW() *fakeGW {
	return &fakeGW{
		tags: map[string]gateway.TagInfo{
			"Line1/In":       {Path: "Line1/In", WriteLevel: auth.LevelOperate},
			"Line1/Out":      {Path: "Line1/Out", WriteLevel: auth.LevelOperate},
			"Line1/Guarded":  {Path: "Line1/Guarded", WriteLevel: auth.LevelSupervise},
			"Line1/ReadOnly": {Path: "Line1/ReadOnly", ReadOnly: true},
			"Line2/Other":    {Path: "Line2/Other", WriteLevel: auth.LevelOperate},
		},
		prepared: map[string]string{},
		block:    make(chan struct{}),
		blocked:  make(chan struct{}, 100),
	}
}

var behaveRe = regexp.MustCompile(`# behave: (\w+)`)

func (f *fakeGW) PrepareNode(_ context.Context, c gateway.NodeCode) (gateway.NodePrepared, error) {
	if strings.Contains(c.Code, "# refuse") {
		// As the service words it (gateway.Nodes): the flow, its version,
		// the node, the line in the node's code.
		return gateway.NodePrepared{}, &gateway.ScriptError{Kind: gateway.KindInvalid,
			Detail: fmt.Sprintf("flow %q version %d, node %q: forbidden name (line 2, column 1, counted in the node's code:)", c.Flow, c.FlowVersion, c.Node)}
	}
	ref := fmt.Sprintf("flow.%s.%s.%d", c.Flow, c.Node, c.Version)
	f.mu.Lock()
	f.prepared[ref] = c.Code
	f.mu.Unlock()
	return gateway.NodePrepared{Ref: ref}, nil
}

func (f *fakeGW) ReleaseNode(ref string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.prepared, ref)
	f.released = append(f.released, ref)
}

func (f *fakeGW) RunNode(ctx context.Context, g auth.Grant, r gateway.NodeRun) ([]gateway.NodeResult, error) {
	f.mu.Lock()
	code, ok := f.prepared[r.Module]
	f.runs++
	f.mu.Unlock()
	if !ok {
		if r.Module == "pumps" && r.Entry == "transform" {
			code = "# behave: echo"
		} else {
			return nil, &gateway.ScriptError{Kind: gateway.KindInvalid, Detail: "unknown module " + r.Module}
		}
	}
	if len(r.Msgs) == 0 || len(r.Msgs) > gateway.MaxNodeBatch {
		// As the sandbox answers (sandbox.RunNodes).
		return nil, &gateway.ScriptError{Kind: gateway.KindInvalid,
			Detail: fmt.Sprintf("a node run takes 1 to %d messages, not %d", gateway.MaxNodeBatch, len(r.Msgs))}
	}
	m := behaveRe.FindStringSubmatch(code)
	if m == nil {
		return nil, fmt.Errorf("fake: code names no behaviour: %q", code)
	}
	var out []gateway.NodeResult
	for _, raw := range r.Msgs {
		var msg map[string]any
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if err := dec.Decode(&msg); err != nil {
			return nil, err
		}
		res, stop := behaviours[m[1]](f, msg)
		out = append(out, res)
		if stop {
			break
		}
	}
	return out, nil
}

// behaviours: a node's answer to one message, and whether the run stops
// after it (a timeout replaces the worker).
var behaviours = map[string]func(f *fakeGW, msg map[string]any) (gateway.NodeResult, bool){
	"echo": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		b, _ := json.Marshal(msg)
		return gateway.NodeResult{Value: b}, false
	},
	"scale": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		if n, ok := msg["payload"].(json.Number); ok {
			x, _ := n.Float64()
			msg["payload"] = x*0.1 + 3
		}
		b, _ := json.Marshal(msg)
		return gateway.NodeResult{Value: b}, false
	},
	"raise": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		return gateway.NodeResult{Err: &gateway.ScriptError{Kind: gateway.KindScriptError, Detail: "ValueError: bad input"}, Line: 3}, false
	},
	"spin": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		return gateway.NodeResult{Err: &gateway.ScriptError{Kind: gateway.KindTimeout, Detail: "ran past its timeout of 200ms and was killed"}}, true
	},
	"garbage": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		return gateway.NodeResult{Value: json.RawMessage(`42`)}, false
	},
	"none": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		return gateway.NodeResult{Value: json.RawMessage(`null`)}, false
	},
	"split": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		return gateway.NodeResult{Value: json.RawMessage(`[{"payload":1},{"payload":2}]`)}, false
	},
	"fanout": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		list := make([]map[string]any, 300)
		for i := range list {
			list[i] = map[string]any{"payload": i}
		}
		b, _ := json.Marshal(list)
		return gateway.NodeResult{Value: b}, false
	},
	"deep": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		return gateway.NodeResult{Value: json.RawMessage(`{"payload": ` + strings.Repeat("[", 150) + strings.Repeat("]", 150) + `}`)}, false
	},
	"block": func(f *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		f.blocked <- struct{}{}
		<-f.block
		b, _ := json.Marshal(msg)
		return gateway.NodeResult{Value: b}, false
	},
	"raise_on_odd": func(_ *fakeGW, msg map[string]any) (gateway.NodeResult, bool) {
		n, _ := msg["payload"].(json.Number).Int64()
		if n%2 == 1 {
			return gateway.NodeResult{Err: &gateway.ScriptError{Kind: gateway.KindScriptError, Detail: "ValueError: odd"}, Line: 2}, false
		}
		b, _ := json.Marshal(msg)
		return gateway.NodeResult{Value: b}, false
	},
}

func (f *fakeGW) WriteTags(_ context.Context, g auth.Grant, writes []gateway.TagWrite) ([]gateway.WriteResult, error) {
	if !g.HasScope(auth.TagWrite) {
		return nil, &auth.DeniedError{Kind: "scope", Need: "tag:write", Target: "tag.write"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]gateway.WriteResult, len(writes))
	for i, w := range writes {
		out[i] = gateway.WriteResult{Path: w.Path, Quality: value.Good}
		t, ok := f.tags[w.Path]
		switch {
		case !ok:
			out[i].Quality, out[i].Reason = value.BadNodeIDUnknown, "unknown tag"
		case !g.AllowsPath(w.Path):
			out[i].Quality, out[i].Reason = value.BadUserAccessDenied, "path outside the allowed prefixes"
		case !g.AllowsLevel(t.WriteLevel):
			out[i].Quality, out[i].Reason = value.BadUserAccessDenied, fmt.Sprintf("write level %q required", t.WriteLevel)
		default:
			f.writes = append(f.writes, w)
			f.grants = append(f.grants, g)
		}
	}
	return out, nil
}

func (f *fakeGW) ListTags(context.Context, auth.Grant) []gateway.TagInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gateway.TagInfo
	for _, t := range f.tags {
		out = append(out, t)
	}
	return out
}

func (f *fakeGW) SubscribeValuesFunc(_ auth.Grant, buf int, want func(string) bool) (<-chan gateway.TagValue, func() uint64, func()) {
	ch := make(chan gateway.TagValue, buf)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.wants = append(f.wants, want)
	f.mu.Unlock()
	var once sync.Once
	return ch, func() uint64 { f.mu.Lock(); defer f.mu.Unlock(); return f.lost }, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.subs = slices.DeleteFunc(f.subs, func(c chan gateway.TagValue) bool { return c == ch })
		})
	}
}

// subscriptions is the number of live subscriptions to the tag changes.
func (f *fakeGW) subscriptions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// change feeds one tag change to the subscribers, as the tag engine does
// (never blocking: a full subscriber loses it, counted).
func (f *fakeGW) change(path string, v value.Value, q value.Quality) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tv := gateway.TagValue{Path: path, VQT: value.VQT{Value: v, Quality: q, Time: time.Now().UTC()}}
	for i, ch := range f.subs {
		if w := f.wants[i]; w != nil && !w(path) {
			continue
		}
		select {
		case ch <- tv:
		default:
			f.lost++
		}
	}
}

func (f *fakeGW) SendMessage(_ context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, handler+" "+string(payload))
	return gateway.ScriptRun{Result: json.RawMessage("null")}, nil
}

func (f *fakeGW) ListScripts(context.Context, auth.Grant) ([]gateway.ScriptInfo, error) {
	return []gateway.ScriptInfo{{Module: "pumps", Version: 1, Entries: []gateway.ScriptEntry{{Name: "transform"}}}}, nil
}

func (f *fakeGW) CanAudit() error { return nil }

func (f *fakeGW) Audit(_ context.Context, g auth.Grant, ev gateway.AuditEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audits = append(f.audits, ev)
	return nil
}

func (f *fakeGW) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

func (f *fakeGW) auditActions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.audits {
		out = append(out, a.Action)
	}
	return out
}

// memStore is Store in memory.
type memStore struct {
	mu    sync.Mutex
	seq   map[string]int
	flows map[string]map[int][]byte
}

func newMemStore() *memStore {
	return &memStore{seq: map[string]int{}, flows: map[string]map[int][]byte{}}
}

func (s *memStore) SaveFlowVersion(name string, version int, rec []byte) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if version == 0 {
		version = s.seq[name] + 1
	} else if version <= s.seq[name] {
		return 0, true, nil
	}
	s.seq[name] = version
	if s.flows[name] == nil {
		s.flows[name] = map[int][]byte{}
	}
	s.flows[name][version] = rec
	return version, false, nil
}

func (s *memStore) versions(name string) []int {
	var vs []int
	for v := range s.flows[name] {
		vs = append(vs, v)
	}
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			if vs[j] < vs[i] {
				vs[i], vs[j] = vs[j], vs[i]
			}
		}
	}
	return vs
}

func (s *memStore) FlowVersion(name string, version int) (int, []byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.versions(name)
	if len(vs) == 0 {
		return 0, nil, false, nil
	}
	if version == 0 {
		version = vs[len(vs)-1]
	}
	rec, ok := s.flows[name][version]
	return version, rec, ok, nil
}

func (s *memStore) FlowVersions(name string) ([]int, [][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.versions(name)
	recs := make([][]byte, len(vs))
	for i, v := range vs {
		recs[i] = s.flows[name][v]
	}
	return vs, recs, nil
}

func (s *memStore) LatestFlows() ([]string, []int, [][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.flows {
		if len(s.flows[n]) > 0 {
			names = append(names, n)
		}
	}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	var vs []int
	var recs [][]byte
	for _, n := range names {
		v := s.versions(n)
		vs = append(vs, v[len(v)-1])
		recs = append(recs, s.flows[n][v[len(v)-1]])
	}
	return names, vs, recs, nil
}

func (s *memStore) DropLatestFlowVersion(name string) (int, []byte, bool, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.versions(name)
	switch len(vs) {
	case 0:
		return 0, nil, false, false, nil
	case 1:
		return 0, nil, true, true, nil
	}
	delete(s.flows[name], vs[len(vs)-1])
	p := vs[len(vs)-2]
	return p, s.flows[name][p], true, false, nil
}

func (s *memStore) DeleteFlowVersions(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := len(s.flows[name]) > 0
	delete(s.flows, name)
	return found, nil
}

// fakeTopics is the supervisor link: topics subscribed, publishes recorded.
type fakeTopics struct {
	mu        sync.Mutex
	subs      map[string]chan TopicMessage
	published []string
}

func (t *fakeTopics) SubscribeTopic(filter string, buf int) (<-chan TopicMessage, func() uint64, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = map[string]chan TopicMessage{}
	}
	ch := make(chan TopicMessage, buf)
	t.subs[filter] = ch
	return ch, func() uint64 { return 0 }, func() {}, nil
}

func (t *fakeTopics) Publish(_ context.Context, g auth.Grant, topic string, payload []byte, retain bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.published = append(t.published, fmt.Sprintf("%s %s retain=%v by %s", topic, payload, retain, g.Principal))
	return nil
}

// fakeAlarms delivers alarm transitions.
type fakeAlarms struct {
	mu   sync.Mutex
	subs []chan AlarmTransition
}

func (a *fakeAlarms) SubscribeTransitions(_ auth.Grant, buf int) (<-chan AlarmTransition, func() uint64, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan AlarmTransition, buf)
	a.subs = append(a.subs, ch)
	return ch, func() uint64 { return 0 }, func() {}
}

func (a *fakeAlarms) send(at AlarmTransition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ch := range a.subs {
		ch <- at
	}
}

// testEngine starts an engine with the project's flows (YAML of the flows:
// section's entries) over gw.
func testEngine(t *testing.T, gw *fakeGW, flowsYAML string, opts ...func(*Options)) *Engine {
	t.Helper()
	var nodes []yaml.Node
	if flowsYAML != "" {
		if err := yaml.Unmarshal([]byte(flowsYAML), &nodes); err != nil {
			t.Fatalf("flows YAML: %v", err)
		}
	}
	o := Options{Gateway: gw, Store: newMemStore(), ProjectFile: "project.yaml", ProjectFlows: nodes,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, f := range opts {
		f(&o)
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitStatus polls the flow's status until cond holds.
func waitStatus(t *testing.T, e *Engine, name string, what string, cond func(gateway.FlowStatus) bool) gateway.FlowStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var st gateway.FlowStatus
	for time.Now().Before(deadline) {
		var err error
		st, err = e.Flow(context.Background(), auth.Grant{}, name)
		if err == nil && cond(st) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("flow %s: %s: not within 10s; last status %+v", name, what, st)
	return st
}

var designer = auth.Full("designer", auth.RealmPlatform, "rest")
