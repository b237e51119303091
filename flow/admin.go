package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// The front doors' operations (gateway.Flows) and the flows' health
// (gateway.FlowHealthSource).

// ListFlows returns every flow's status, sorted by name.
func (e *Engine) ListFlows(context.Context, auth.Grant) ([]gateway.FlowStatus, error) {
	e.mu.RLock()
	all := make([]*flowState, 0, len(e.flows))
	for _, fs := range e.flows {
		all = append(all, fs)
	}
	e.mu.RUnlock()
	slices.SortFunc(all, func(a, b *flowState) int { return strings.Compare(a.name, b.name) })
	out := make([]gateway.FlowStatus, len(all))
	for i, fs := range all {
		out[i] = fs.status()
	}
	return out, nil
}

// Flow returns one flow's status.
func (e *Engine) Flow(_ context.Context, _ auth.Grant, name string) (gateway.FlowStatus, error) {
	fs := e.lookup(name)
	if fs == nil {
		return gateway.FlowStatus{}, e.notFound(name)
	}
	return fs.status(), nil
}

func (e *Engine) notFound(name string) error {
	e.mu.RLock()
	names := make([]string, 0, len(e.flows))
	for n := range e.flows {
		names = append(names, n)
	}
	e.mu.RUnlock()
	slices.Sort(names)
	have := strings.Join(names, ", ")
	if have == "" {
		have = "none"
	}
	return fmt.Errorf("%w: no flow %q (have: %s)", gateway.ErrNotFound, name, have)
}

// FlowHealth returns every flow's state for health.
func (e *Engine) FlowHealth() map[string]gateway.FlowHealth {
	e.mu.RLock()
	all := make([]*flowState, 0, len(e.flows))
	for _, fs := range e.flows {
		all = append(all, fs)
	}
	e.mu.RUnlock()
	out := make(map[string]gateway.FlowHealth, len(all))
	for _, fs := range all {
		st := fs.status()
		out[fs.name] = gateway.FlowHealth{State: st.State, Reason: st.Reason}
	}
	if n := e.feedLostTotal(); n > 0 {
		// Not one flow's: the tag engine's feed to every tag trigger overflowed.
		out["(tag feed)"] = gateway.FlowHealth{State: gateway.FlowFailed,
			Reason: fmt.Sprintf("the flows' feed of tag changes lost %d changes (more than %d waiting)", n, tagFeed)}
	}
	return out
}

// projectError makes a parse failure a *gateway.ProjectError, one
// problem per line.
func projectError(err error) error {
	var pe *gateway.ProjectError
	if errors.As(err, &pe) {
		return err
	}
	if !errors.Is(err, gateway.ErrInvalid) && !strings.Contains(err.Error(), "flow ") {
		return err
	}
	out := &gateway.ProjectError{}
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		line := 0
		if _, rest, ok := strings.Cut(l, "line "); ok {
			fmt.Sscanf(rest, "%d", &line)
		}
		out.Problems = append(out.Problems, gateway.Problem{Line: line, Message: strings.TrimPrefix(l, gateway.ErrInvalid.Error()+": ")})
	}
	return out
}

// canChange refuses an administrative change that could not be audited.
func (e *Engine) canChange(what string) error {
	if err := e.gw.CanAudit(); err != nil {
		return fmt.Errorf("%s refused, nothing changed: %w", what, err)
	}
	return nil
}

func (e *Engine) auditAdmin(ctx context.Context, g auth.Grant, action, target string, after any) {
	if err := e.gw.Audit(context.WithoutCancel(ctx), g, gateway.AuditEvent{Action: action, Target: target, Result: "ok", After: after}); err != nil {
		e.log.Error("flow audit record lost", slog.String("action", action), slog.String("flow", target), slog.Any("err", err))
	}
}

func (e *Engine) checkStarted() error {
	if !e.started {
		return fmt.Errorf("%w: the flow engine is not running", gateway.ErrUnavailable)
	}
	return nil
}

// SaveFlow checks, stores and runs a new version of a flow.
func (e *Engine) SaveFlow(ctx context.Context, g auth.Grant, src gateway.FlowSource) (gateway.FlowSaved, error) {
	if err := CheckName("flow", src.Name); err != nil {
		return gateway.FlowSaved{}, err
	}
	if src.Version < 0 || src.Version > MaxVersion {
		return gateway.FlowSaved{}, fmt.Errorf("%w: flow %s: version %d: want 1 to %d (or none: the next)", gateway.ErrInvalid, src.Name, src.Version, MaxVersion)
	}
	e.adminMu.Lock()
	adminHeld := true
	defer func() {
		if adminHeld {
			e.adminMu.Unlock()
		}
	}()
	if err := e.checkStarted(); err != nil {
		return gateway.FlowSaved{}, err
	}
	d, err := ParseDoc(src.Name, src.Doc, e.env(ctx))
	if err != nil {
		return gateway.FlowSaved{}, projectError(err)
	}
	if err := g.Covers(d.Grant, "flow "+d.Name); err != nil {
		return gateway.FlowSaved{}, err
	}
	if err := e.messageTaken(d); err != nil {
		return gateway.FlowSaved{}, err
	}
	if err := e.canChange("saving flow " + d.Name); err != nil {
		return gateway.FlowSaved{}, err
	}
	// Check and register the code before anything is stored: a node the
	// sandbox refuses leaves the running version as it is.
	in, err := e.prepare(ctx, d, 0)
	if err != nil {
		return gateway.FlowSaved{}, err
	}
	v, err := e.store(d.Name, src.Version, d.Doc, g.Principal)
	if err != nil {
		in.release()
		return gateway.FlowSaved{}, err
	}
	in.version = v
	fs := e.state(d.Name)
	// Waiting for the running version to finish its batch (up to
	// stopGrace) holds this flow only: the other flows' saves, deletions
	// and resets go on meanwhile. The version being installed holds its
	// message name (messageTaken) until it runs.
	fs.installMu.Lock()
	defer fs.installMu.Unlock()
	fs.setNext(d)
	defer fs.setNext(nil)
	e.adminMu.Unlock()
	adminHeld = false
	queued, _ := fs.q.len()
	dropped, err := e.install(ctx, fs, in)
	if err != nil {
		return gateway.FlowSaved{Name: d.Name, Version: v}, fmt.Errorf("flow %s version %d saved but not started: %w", d.Name, v, err)
	}
	carried := max(queued-dropped, 0)
	e.auditAdmin(ctx, g, "flow.save", d.Name, map[string]any{"version": v, "carried": carried, "dropped": dropped})
	e.log.Info("flow version running", slog.String("flow", d.Name), slog.Int64("version", v),
		slog.Int("carried", carried), slog.Int("dropped", dropped), slog.String("principal", g.Principal))
	return gateway.FlowSaved{Name: d.Name, Version: v, Carried: carried, Dropped: uint64(dropped)}, nil
}

// RollbackFlow withdraws the latest version of a flow; the one before runs.
func (e *Engine) RollbackFlow(ctx context.Context, g auth.Grant, name string) (gateway.FlowSaved, error) {
	if err := CheckName("flow", name); err != nil {
		return gateway.FlowSaved{}, err
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if err := e.checkStarted(); err != nil {
		return gateway.FlowSaved{}, err
	}
	versions, recs, err := e.opts.Store.FlowVersions(name)
	if err != nil {
		return gateway.FlowSaved{}, err
	}
	switch len(versions) {
	case 0:
		return gateway.FlowSaved{}, e.notFound(name)
	case 1:
		return gateway.FlowSaved{}, fmt.Errorf("%w: flow %s has only version %d: nothing to roll back to", gateway.ErrConflict, name, versions[0])
	}
	prevV := versions[len(versions)-2]
	var r record
	if err := json.Unmarshal(recs[len(recs)-2], &r); err != nil {
		return gateway.FlowSaved{}, fmt.Errorf("flow %s version %d unreadable: %w", name, prevV, err)
	}
	d, err := ParseDoc(name, []byte(r.Doc), e.env(ctx))
	if err != nil {
		return gateway.FlowSaved{}, fmt.Errorf("%w: flow %s version %d no longer fits the project, not rolled back: %s", gateway.ErrConflict, name, prevV, firstLine(err))
	}
	if err := g.Covers(d.Grant, "flow "+name); err != nil {
		return gateway.FlowSaved{}, err
	}
	if err := e.messageTaken(d); err != nil {
		return gateway.FlowSaved{}, err
	}
	if err := e.canChange("rolling back flow " + name); err != nil {
		return gateway.FlowSaved{}, err
	}
	v, _, found, only, err := e.opts.Store.DropLatestFlowVersion(name)
	switch {
	case err != nil:
		return gateway.FlowSaved{}, err
	case !found:
		return gateway.FlowSaved{}, e.notFound(name)
	case only:
		return gateway.FlowSaved{}, fmt.Errorf("%w: flow %s has one version: nothing to roll back to", gateway.ErrConflict, name)
	}
	fs := e.state(name)
	fs.installMu.Lock()
	defer fs.installMu.Unlock()
	queued, _ := fs.q.len()
	dropped, err := e.run(ctx, fs, d, int64(v))
	if err != nil {
		return gateway.FlowSaved{Name: name, Version: int64(v)}, fmt.Errorf("flow %s rolled back to version %d but not started: %w", name, v, err)
	}
	carried := max(queued-dropped, 0)
	e.auditAdmin(ctx, g, "flow.rollback", name, map[string]any{"from": versions[len(versions)-1], "to": v, "carried": carried, "dropped": dropped})
	return gateway.FlowSaved{Name: name, Version: int64(v), Carried: carried, Dropped: uint64(dropped)}, nil
}

// FlowVersions lists a flow's stored versions.
func (e *Engine) FlowVersions(_ context.Context, _ auth.Grant, name string) ([]gateway.FlowVersion, error) {
	versions, recs, err := e.opts.Store.FlowVersions(name)
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, e.notFound(name)
	}
	out := make([]gateway.FlowVersion, len(versions))
	for i, v := range versions {
		var r record
		_ = json.Unmarshal(recs[i], &r) // written by store(); an unreadable one lists without its details
		out[i] = gateway.FlowVersion{Version: int64(v), Saved: r.Saved, Principal: r.By}
	}
	return out, nil
}

// FlowDefinition returns a stored version's definition.
func (e *Engine) FlowDefinition(_ context.Context, _ auth.Grant, name string, version int64) ([]byte, error) {
	if version < 0 {
		return nil, fmt.Errorf("%w: version %d", gateway.ErrInvalid, version)
	}
	v, rec, ok, err := e.opts.Store.FlowVersion(name, int(version))
	if err != nil {
		return nil, err
	}
	if !ok {
		if version == 0 {
			return nil, e.notFound(name)
		}
		return nil, fmt.Errorf("%w: flow %s has no version %d", gateway.ErrNotFound, name, version)
	}
	var r record
	if err := json.Unmarshal(rec, &r); err != nil {
		return nil, fmt.Errorf("flow %s version %d unreadable: %w", name, v, err)
	}
	return []byte(r.Doc), nil
}

// DeleteFlow stops a flow and removes its versions.
func (e *Engine) DeleteFlow(ctx context.Context, g auth.Grant, name string) (gateway.FlowSaved, error) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	fs := e.lookup(name)
	if fs == nil {
		return gateway.FlowSaved{}, e.notFound(name)
	}
	if err := coversFlow(g, fs); err != nil {
		return gateway.FlowSaved{}, err
	}
	if err := e.canChange("deleting flow " + name); err != nil {
		return gateway.FlowSaved{}, err
	}
	fs.installMu.Lock() // a version being installed runs first, then stops here
	defer fs.installMu.Unlock()
	if in := fs.current(); in != nil {
		in.stop(ctx, false)
		in.release()
	}
	if _, err := e.opts.Store.DeleteFlowVersions(name); err != nil {
		return gateway.FlowSaved{}, err
	}
	dropped := fs.q.clear()
	e.mu.Lock()
	delete(e.flows, name)
	e.mu.Unlock()
	e.rebuildRoutes()
	e.auditAdmin(ctx, g, "flow.delete", name, map[string]any{"dropped": dropped})
	return gateway.FlowSaved{Name: name, Dropped: uint64(dropped)}, nil
}

// ResetFlow clears a flow's failed nodes, or starts a stopped flow again
// from its stored latest version.
func (e *Engine) ResetFlow(ctx context.Context, g auth.Grant, name string) (gateway.FlowStatus, error) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if err := e.checkStarted(); err != nil {
		return gateway.FlowStatus{}, err
	}
	fs := e.lookup(name)
	if fs == nil {
		return gateway.FlowStatus{}, e.notFound(name)
	}
	if err := coversFlow(g, fs); err != nil {
		return gateway.FlowStatus{}, err
	}
	if err := e.canChange("resetting flow " + name); err != nil {
		return gateway.FlowStatus{}, err
	}
	fs.installMu.Lock()
	defer fs.installMu.Unlock()
	detail := map[string]any{}
	if in := fs.current(); in != nil {
		ids := in.reset()
		detail["nodes"] = ids
		if ids == nil {
			detail["nodes"] = []string{}
		}
	} else {
		v, rec, ok, err := e.opts.Store.FlowVersion(name, 0)
		if err != nil {
			return gateway.FlowStatus{}, err
		}
		if !ok {
			return gateway.FlowStatus{}, e.notFound(name)
		}
		var r record
		if err := json.Unmarshal(rec, &r); err != nil {
			return gateway.FlowStatus{}, fmt.Errorf("flow %s version %d unreadable: %w", name, v, err)
		}
		d, err := ParseDoc(name, []byte(r.Doc), e.env(ctx))
		if err != nil {
			fs.stopped(int64(v), nil, "no longer fits the project: "+firstLine(err))
			return fs.status(), fmt.Errorf("%w: flow %s version %d cannot start: %s", gateway.ErrConflict, name, v, firstLine(err))
		}
		if err := g.Covers(d.Grant, "flow "+name); err != nil {
			return fs.status(), err
		}
		if err := e.messageTaken(d); err != nil {
			return fs.status(), err
		}
		if _, err := e.run(ctx, fs, d, int64(v)); err != nil {
			return fs.status(), fmt.Errorf("%w: flow %s: %v", gateway.ErrConflict, name, err)
		}
		detail["restarted"] = v
	}
	e.auditAdmin(ctx, g, "flow.reset", name, detail)
	e.log.Info("flow reset", slog.String("flow", name), slog.String("principal", g.Principal), slog.Any("detail", detail))
	return fs.status(), nil
}

// messageTaken refuses d when its message trigger is the trigger of
// another running flow: a message goes to one flow, never to whichever
// of two a lookup meets first (and no flow takes over another's
// messages).
func (e *Engine) messageTaken(d *Def) error {
	if d.Trigger.Kind != TriggerMessage {
		return nil
	}
	if other := e.messageFlow(d.Trigger.Message, d.Name); other != "" {
		return fmt.Errorf("%w: flow %s: message %q is already the trigger of flow %s; a message goes to one flow (change the name, or delete flow %s first)",
			gateway.ErrConflict, d.Name, d.Trigger.Message, other, other)
	}
	return nil
}

// messageFlow is the running flow other than except whose trigger is the
// message handler, or "".
func (e *Engine) messageFlow(handler, except string) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for name, fs := range e.flows {
		if name == except {
			continue
		}
		if cur := fs.current(); cur != nil && cur.def.Trigger.Kind == TriggerMessage && cur.def.Trigger.Message == handler {
			return name
		}
		if nd := fs.nextDef(); nd != nil && nd.Trigger.Kind == TriggerMessage && nd.Trigger.Message == handler {
			return name // a version saved and being installed
		}
	}
	return ""
}

// coversFlow refuses a deletion or reset of fs by a designer whose grant
// does not cover the flow's (auth.Grant.Covers): who could not have saved
// the flow may not remove it or start its failed nodes again, as a
// rollback needs the grant of the version it runs.
func coversFlow(g auth.Grant, fs *flowState) error {
	fs.mu.Lock()
	d := fs.def
	fs.mu.Unlock()
	if d == nil { // a stored version that cannot be read: nothing runs with a grant
		return nil
	}
	return g.Covers(d.Grant, "flow "+fs.name)
}
