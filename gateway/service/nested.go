package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Scripts calling scripts (message.send, script.runOnGateway): a script
// called by a script never gets more than its caller, and the nesting is
// bounded.

// MaxCallDepth is how deep message.send and script.runOnGateway may nest
// (a script calling a script calling ...).
const MaxCallDepth = 4

type depthKey struct{}

// callDepth is how many nested runs ctx is inside.
func callDepth(ctx context.Context) int {
	n, _ := ctx.Value(depthKey{}).(int)
	return n
}

// nestedDenied is a refusal that happened inside a nested run: it reaches
// the calling script as PermissionDenied but is not audited again (the
// nested run's own refusal was).
type nestedDenied struct{ *auth.DeniedError }

func (e nestedDenied) Unwrap() error { return e.DeniedError }

// runNested runs module.entry for a message handler or runOnGateway: the
// grant is the caller's intersected with restrict (if any); the depth is
// bounded; the entry's own timeout applies (and the caller's deadline).
func (s *Service) runNested(ctx context.Context, g auth.Grant, what, module, entry string, restrict *auth.Grant, args json.RawMessage) (gateway.ScriptRun, error) {
	depth := callDepth(ctx) + 1
	if depth > MaxCallDepth {
		return gateway.ScriptRun{}, fmt.Errorf("%s: call depth limit %d reached (scripts calling scripts); not run", what, MaxCallDepth)
	}
	ng := g
	if restrict != nil {
		ng = g.Intersect(*restrict)
	}
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	run := s.RunScript
	if s.runner != nil {
		run = s.runner
	}
	res, err := run(context.WithValue(ctx, depthKey{}, depth), ng, module, entry, args)
	if err != nil {
		var se *gateway.ScriptError
		if errors.As(err, &se) {
			if se.Kind == gateway.KindPermissionDenied {
				return res, nestedDenied{&auth.DeniedError{Kind: "nested", Need: se.Detail, Target: what}}
			}
			return res, &gateway.ScriptError{Kind: se.Kind, Detail: fmt.Sprintf("%s (%s.%s) failed: %s", what, module, entry, se.Detail)}
		}
		return res, fmt.Errorf("%s (%s.%s): %w", what, module, entry, err)
	}
	return res, nil
}

func (s *Service) sendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, error) {
	h, ok := s.data.handlers[handler]
	if !ok {
		names := make([]string, 0, len(s.data.handlers))
		for n := range s.data.handlers {
			names = append(names, n)
		}
		slices.Sort(names)
		return gateway.ScriptRun{}, fmt.Errorf("message handler %q: %w (have: %s)", handler, errNotFound, strings.Join(names, ", "))
	}
	return s.runNested(ctx, g, "message handler "+handler, h.Module, h.Entry, h.Restrict, payload)
}

func (s *Service) runOnGateway(ctx context.Context, g auth.Grant, entry string, args json.RawMessage) (gateway.ScriptRun, error) {
	module, name, err := gateway.ParseEntry(entry)
	if err != nil {
		return gateway.ScriptRun{}, fmt.Errorf("script.runOnGateway: %w", err)
	}
	return s.runNested(ctx, g, "script.runOnGateway "+entry, module, name, nil, args)
}

// SendMessage runs a message handler with the sender's grant, never more
// (gateway.Data). A refusal inside the run is the run's own
// *auth.DeniedError.
func (s *Service) SendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, error) {
	run, err := s.sendMessage(ctx, g, handler, payload)
	var nd nestedDenied
	if errors.As(err, &nd) {
		return run, nd.DeniedError
	}
	return run, kinded(err)
}
