package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
)

// The Python nodes of flows (gateway.Nodes), the messages that go to flows
// (gateway.MessageSink) and the flows' state in health
// (gateway.FlowHealthSource). The flow engine (package flow) calls the
// first; the daemon hands the engine to the service for the others
// (RouteMessages, SetFlowHealth).

var _ gateway.Nodes = (*Service)(nil)

// nodePrefix begins the module name of every prepared node: a dot, which
// no script module's name may hold (gateway.CheckName), so a node is never
// a script's module and REST cannot run one.
const nodePrefix = "flow."

// flowHooks are the flow engine's parts the service calls, set by the
// daemon once the engine exists.
type flowHooks struct {
	mu     sync.RWMutex
	sink   gateway.MessageSink
	health gateway.FlowHealthSource
}

// RouteMessages sends the messages whose handler is not one of the
// project's message handlers to sink (the flow engine's message triggers).
func (s *Service) RouteMessages(sink gateway.MessageSink) {
	s.flows.mu.Lock()
	s.flows.sink = sink
	s.flows.mu.Unlock()
}

// SetFlowHealth makes Health include the flows' states from src.
func (s *Service) SetFlowHealth(src gateway.FlowHealthSource) {
	s.flows.mu.Lock()
	s.flows.health = src
	s.flows.mu.Unlock()
}

func (s *Service) messageSink() gateway.MessageSink {
	s.flows.mu.RLock()
	defer s.flows.mu.RUnlock()
	return s.flows.sink
}

func (s *Service) flowHealth() gateway.FlowHealthSource {
	s.flows.mu.RLock()
	defer s.flows.mu.RUnlock()
	return s.flows.health
}

// PrepareNode checks a Python node's code and registers it as module
// "flow.<flow>.<node>.<version>" (gateway.Nodes).
func (s *Service) PrepareNode(ctx context.Context, c gateway.NodeCode) (gateway.NodePrepared, error) {
	for what, v := range map[string]string{"flow": c.Flow, "node": c.Node} {
		if v == "" || strings.ContainsAny(v, "./\\\x00 ") {
			return gateway.NodePrepared{}, &gateway.ScriptError{Kind: gateway.KindInvalid,
				Detail: fmt.Sprintf("%s name %q: want letters, digits, _ or -", what, v)}
		}
	}
	ref := nodePrefix + c.Flow + "." + c.Node + "." + strconv.FormatInt(c.Version, 10)
	info, err := s.pool.Check(ctx, ref, c.Code)
	if err != nil {
		return gateway.NodePrepared{Ref: ref, Diagnostics: diagsOf(info.Diagnostics)}, nodeRefusal(c, info.Diagnostics, err)
	}
	found := false
	for _, e := range info.Entries {
		found = found || e.Name == "transform"
	}
	if !found {
		return gateway.NodePrepared{Ref: ref, Diagnostics: diagsOf(info.Diagnostics)}, &gateway.ScriptError{Kind: gateway.KindInvalid,
			Detail: fmt.Sprintf("node %s of flow %s defines no transform(msg) at top level", c.Node, c.Flow)}
	}
	s.pool.SetModule(ref, c.Code, info, int(c.Version))
	return gateway.NodePrepared{Ref: ref, Diagnostics: diagsOf(info.Diagnostics)}, nil
}

// nodeRefusal words a node's failed check for its author: the flow, its
// version and the node as the flow file names them, then the first error
// at its line and column in the node's code: (the module checked is that
// code alone, so its lines are the block's), and how many more there
// are; never the internal module name (flow.<flow>.<node>.<n>), the
// location once. A failure that is no diagnostic (the runtime is
// missing) is scriptError's.
func nodeRefusal(c gateway.NodeCode, diags []sandbox.Diagnostic, err error) error {
	var first *sandbox.Diagnostic
	n := 0
	for i := range diags {
		if diags[i].Severity == "error" {
			if first == nil {
				first = &diags[i]
			}
			n++
		}
	}
	var re *sandbox.RunError
	if first == nil || !errors.As(err, &re) || re.Kind != gateway.KindInvalid {
		return scriptError(err)
	}
	where := fmt.Sprintf("flow %q", c.Flow)
	if c.FlowVersion > 0 {
		where += fmt.Sprintf(" version %d", c.FlowVersion)
	}
	d := fmt.Sprintf("%s, node %q: %s (line %d, column %d, counted in the node's code:)", where, c.Node, first.Message, first.Line, first.Column)
	if n > 1 {
		d += fmt.Sprintf(" and %d more problems", n-1)
	}
	return &gateway.ScriptError{Kind: gateway.KindInvalid, Detail: d}
}

// ReleaseNode forgets a prepared node (gateway.Nodes).
func (s *Service) ReleaseNode(ref string) {
	if strings.HasPrefix(ref, nodePrefix) {
		s.pool.RemoveModule(ref)
	}
}

// RunNode runs a node's entry once per message on one worker
// (gateway.Nodes).
func (s *Service) RunNode(ctx context.Context, g auth.Grant, r gateway.NodeRun) ([]gateway.NodeResult, error) {
	if !strings.HasPrefix(r.Module, nodePrefix) {
		if err := gateway.CheckName("module", r.Module); err != nil {
			return nil, &gateway.ScriptError{Kind: gateway.KindInvalid, Detail: err.Error()}
		}
	}
	for i, m := range r.Msgs {
		if d := jsonDepth(m); d > MaxArgsDepth {
			return nil, &gateway.ScriptError{Kind: gateway.KindInvalid,
				Detail: fmt.Sprintf("message %d nests %d levels deep; at most %d are accepted", i, d, MaxArgsDepth)}
		}
	}
	items, err := s.pool.RunNodes(ctx, g, r.Module, r.Entry, r.Msgs, r.Timeout)
	if err != nil {
		var re *sandbox.RunError
		if errors.As(err, &re) {
			return nil, &gateway.ScriptError{Kind: re.Kind, Detail: nodeText(r, re.Detail)}
		}
		return nil, err
	}
	out := make([]gateway.NodeResult, len(items))
	for i, it := range items {
		res := gateway.NodeResult{Value: it.Result, Duration: time.Duration(it.DurationMs * float64(time.Millisecond)),
			Logs: make([]gateway.LogLine, len(it.Logs))}
		for j, l := range it.Logs {
			res.Logs[j] = gateway.LogLine{Level: l.Level, Msg: l.Msg}
		}
		if it.Err != nil {
			res.Err = &gateway.ScriptError{Kind: it.Err.Kind, Detail: nodeText(r, it.Err.Detail)}
			res.Line = it.Err.Line
		}
		out[i] = res
	}
	return out, nil
}

// nodeText names a prepared node "the node" in a sandbox message instead
// of by its module ("flow.scale.py.3.transform ran past its timeout" →
// "the node ran past its timeout").
func nodeText(r gateway.NodeRun, s string) string {
	if !strings.HasPrefix(r.Module, nodePrefix) {
		return s
	}
	s = strings.ReplaceAll(s, r.Module+"."+r.Entry, "the node")
	return strings.ReplaceAll(s, r.Module, "the node")
}

// deliverToFlows hands a message whose handler the project does not define
// to the flow engine; ok is false when no flow takes it either.
func (s *Service) deliverToFlows(ctx context.Context, g auth.Grant, handler string, payload []byte) (gateway.ScriptRun, bool, error) {
	sink := s.messageSink()
	if sink == nil {
		return gateway.ScriptRun{}, false, nil
	}
	return sink.DeliverMessage(ctx, g, handler, payload)
}

// flowHandlers lists the message names the flows take, for the message of
// an unknown handler.
func (s *Service) flowHandlers() []string {
	if sink := s.messageSink(); sink != nil {
		return sink.MessageHandlers()
	}
	return nil
}

// flowsHealth adds the flows' states to a health report: a flow that is not
// running degrades it.
func (s *Service) flowsHealth(out *gateway.HealthReport, degrade func(string)) {
	src := s.flowHealth()
	if src == nil {
		return
	}
	out.Flows = src.FlowHealth()
	names := make([]string, 0, len(out.Flows))
	for n := range out.Flows {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if fh := out.Flows[n]; fh.State != gateway.FlowRunning {
			degrade(fmt.Sprintf("flow %q %s: %s", n, fh.State, fh.Reason))
		}
	}
}

// errNoHandler is the refusal of a message to a name nothing receives.
func errNoHandler(handler string, names []string) error {
	return fmt.Errorf("message handler %q: %w (have: %s)", handler, errNotFound, strings.Join(names, ", "))
}
