package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// authenticator checks bearer tokens against the API keys and the bootstrap
// token.
type authenticator struct{ s *System }

func (a authenticator) Authenticate(_ context.Context, bearer string) (auth.Grant, error) {
	g, err := a.s.Keys.Authenticate(bearer)
	if err != nil {
		return auth.Grant{}, fmt.Errorf("%w: %v", api.ErrUnauthenticated, err)
	}
	a.s.apiSeen.Store(time.Now().UnixNano())
	return g, nil
}

// tagsAPI is the tag engine as the API sees it.
type tagsAPI struct{ s *System }

func (t tagsAPI) ListTags(_ context.Context, g auth.Grant) []apitypes.TagInfo {
	infos := t.s.Engine().Tags(g)
	out := make([]apitypes.TagInfo, len(infos))
	for i, ti := range infos {
		out[i] = apitypes.TagInfo{Path: ti.Path, Device: ti.Device, Address: ti.Point.Address,
			Type: ti.Point.Type.String(), Units: ti.Units, WriteLevel: ti.WriteLevel.String(),
			ReadOnly: ti.ReadOnly, Scan: ti.Scan.String()}
		if a, ok := t.s.resolved.shownAddress(ti.Path); ok {
			out[i].Address = a // an OPC UA ns= address converted since start (resolved.go)
		}
	}
	return out
}

func (t tagsAPI) ReadTags(_ context.Context, g auth.Grant, paths []string) []apitypes.TagValue {
	res, err := t.s.Engine().Read(g, paths)
	out := make([]apitypes.TagValue, len(paths))
	for i, p := range paths {
		if err != nil {
			out[i] = apitypes.FromVQT(p, value.Bad(value.BadUserAccessDenied, err.Error(), time.Now()))
			continue
		}
		out[i] = apitypes.FromVQT(p, res[i].VQT)
	}
	return out
}

func (t tagsAPI) WriteTags(ctx context.Context, g auth.Grant, writes []apitypes.TagWrite) ([]apitypes.WriteResult, error) {
	reqs := make([]tagengine.WriteRequest, len(writes))
	for i, w := range writes {
		reqs[i] = tagengine.WriteRequest{Path: w.Path, Value: w.Value}
	}
	res, err := t.s.Engine().Write(ctx, g, reqs)
	if err != nil {
		if errors.Is(err, tagengine.ErrLevelLookup) {
			return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		return nil, err
	}
	out := make([]apitypes.WriteResult, len(res))
	for i, r := range res {
		out[i] = apitypes.WriteResult{Path: r.Path, Status: r.Quality.String(), Reason: r.Reason}
	}
	return out, nil
}

// keysAPI manages API keys; every change is audited.
type keysAPI struct{ s *System }

func (k keysAPI) CreateAPIKey(_ context.Context, g auth.Grant, req apitypes.APIKeyRequest) (apitypes.APIKeyCreated, error) {
	rec := auth.KeyRecord{Name: req.Name, Prefixes: req.Prefixes}
	for _, sc := range req.Scopes {
		s, err := auth.ParseScope(sc)
		if err != nil {
			return apitypes.APIKeyCreated{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
		}
		rec.Scopes = append(rec.Scopes, s)
	}
	for _, pe := range req.Permissions {
		p, err := auth.ParsePermission(pe)
		if err != nil {
			return apitypes.APIKeyCreated{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
		}
		rec.Permissions = append(rec.Permissions, p)
	}
	if req.WriteLevel != "" {
		l, err := auth.ParseLevel(req.WriteLevel)
		if err != nil {
			return apitypes.APIKeyCreated{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
		}
		rec.WriteLevel = l
	}
	if req.Expires != nil {
		rec.Expires = req.Expires.UTC()
	}
	id, tok, err := k.s.Keys.Create(g, rec)
	if err != nil {
		return apitypes.APIKeyCreated{}, err
	}
	k.s.auditAdmin(g, "apikey.create", id, map[string]any{"name": req.Name, "scopes": req.Scopes,
		"write_level": req.WriteLevel, "permissions": req.Permissions, "prefixes": req.Prefixes})
	return apitypes.APIKeyCreated{ID: id, Token: tok}, nil
}

func (k keysAPI) ListAPIKeys(context.Context) ([]apitypes.APIKeyInfo, error) {
	recs, err := k.s.Keys.List()
	if err != nil {
		return nil, err
	}
	out := []apitypes.APIKeyInfo{}
	for _, r := range recs {
		if r.Revoked {
			continue
		}
		info := apitypes.APIKeyInfo{ID: r.ID, Name: r.Name, WriteLevel: r.WriteLevel.String(),
			Prefixes: r.Prefixes, Created: r.Created}
		for _, s := range r.Scopes {
			info.Scopes = append(info.Scopes, string(s))
		}
		for _, p := range r.Permissions {
			info.Permissions = append(info.Permissions, string(p))
		}
		if !r.Expires.IsZero() {
			e := r.Expires
			info.Expires = &e
		}
		out = append(out, info)
	}
	return out, nil
}

func (k keysAPI) RevokeAPIKey(_ context.Context, id string) error {
	if err := k.s.Keys.Revoke(id); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, auth.ErrNotFound) {
			return fmt.Errorf("api key %q: %w", id, api.ErrNotFound)
		}
		return err
	}
	k.s.auditAdmin(auth.Grant{Principal: "api"}, "apikey.revoke", id, nil)
	return nil
}

// healthAPI reports health: degraded when a device is not connected or the
// Python runtime is missing.
type healthAPI struct{ s *System }

func (h healthAPI) Health(context.Context) apitypes.Health {
	s := h.s
	out := apitypes.Health{Status: apitypes.HealthOK, Reasons: []string{}, Version: Version,
		UptimeS: int64(time.Since(s.started).Seconds()), Devices: map[string]apitypes.DeviceHealth{}}
	for name, st := range s.Engine().DeviceStates() {
		out.Devices[name] = apitypes.DeviceHealth{State: st[0], Reason: st[1]}
		if st[0] != "connected" {
			out.Status = apitypes.HealthDegraded
			out.Reasons = append(out.Reasons, fmt.Sprintf("device %q %s: %s", name, st[0], st[1]))
		}
	}
	if s.Scripts != nil {
		sh, reasons := s.Scripts.health()
		out.Sandbox = sh
		if len(reasons) > 0 {
			out.Status = apitypes.HealthDegraded
			out.Reasons = append(out.Reasons, reasons...)
		}
	}
	if st := s.Audit.Stats(); st.LastError != nil && st.Enqueued > st.Committed {
		out.Status = apitypes.HealthDegraded
		out.Reasons = append(out.Reasons, "audit log cannot commit: "+st.LastError.Error())
	}
	if s.Data != nil {
		if al := s.Data.Alarms(); len(al) > 0 { // history retention, commits, overflow (data.go)
			out.Status = apitypes.HealthDegraded
			out.Reasons = append(out.Reasons, al...)
		}
	}
	return out
}

// devicesAPI lists the devices with their state.
type devicesAPI struct{ s *System }

func (d devicesAPI) ListDevices(context.Context) []apitypes.DeviceInfo {
	states := d.s.Engine().DeviceStates()
	p := d.s.Project()
	count := map[string]int{}
	for _, t := range p.Tags {
		count[t.Device]++
	}
	var out []apitypes.DeviceInfo
	for _, dc := range p.Devices {
		var raw struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(dc.Raw, &raw) // only for display; the driver validated it
		st := states[dc.Name]
		out = append(out, apitypes.DeviceInfo{Name: dc.Name, Driver: dc.Driver, URL: raw.URL,
			State: st[0], Reason: st[1], Tags: count[dc.Name]})
	}
	return out
}

func (d devicesAPI) DevicePlan(_ context.Context, name string) ([]apitypes.PlannedRequest, error) {
	steps, err := d.s.Engine().Plan(name)
	if err != nil {
		if errors.Is(err, tagengine.ErrUnknownDevice) {
			return nil, fmt.Errorf("%w: %v", api.ErrNotFound, err)
		}
		return nil, err
	}
	out := make([]apitypes.PlannedRequest, len(steps))
	for i, st := range steps {
		out[i] = apitypes.PlannedRequest{Scan: st.Scan.String(), FunctionCode: st.Function, UnitID: st.Unit,
			Start: st.Start, Count: st.Count, Tags: st.Tags}
	}
	return out, nil
}

// auditSink is the tag engine's audit sink over the store's group-committed
// log. A write is refused while the queue is nearly full or the disk fails.
type auditSink struct{ s *System }

func (a auditSink) CanAudit() error {
	st := a.s.Audit.Stats()
	pending := st.Enqueued - st.Committed
	if pending >= uint64(store.DefaultAuditOptions.Queue)*9/10 {
		return fmt.Errorf("audit queue nearly full (%d pending)", pending)
	}
	if st.LastError != nil && pending > 0 {
		return fmt.Errorf("audit log cannot commit: %w", st.LastError)
	}
	return nil
}

// SyncAudit waits until the records queued so far are committed
// (tagengine.AuditSyncer): equipment writes are answered only then.
func (a auditSink) SyncAudit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return a.s.Audit.Flush(ctx)
}

func (a auditSink) Audit(ev tagengine.AuditEvent) error {
	rec := store.AuditRecord{Time: ev.Time, Principal: ev.Grant.Principal, Realm: string(ev.Grant.Realm),
		Origin: ev.Grant.Origin, Action: ev.Action, Target: ev.Target, Result: ev.Result, Detail: ev.Detail}
	if script, ok := scriptOf(ev.Grant.Origin); ok {
		rec.Script = script
	}
	if ev.Before != nil {
		rec.Before = vqtJSON(*ev.Before)
	}
	if ev.After != nil {
		if b, err := json.Marshal(ev.After); err == nil {
			rec.After = b
		}
	}
	return a.s.Audit.Enqueue(rec)
}

func scriptOf(origin string) (string, bool) {
	const p = "script:"
	if len(origin) > len(p) && origin[:len(p)] == p {
		return origin[len(p):], true
	}
	return "", false
}

func vqtJSON(v value.VQT) json.RawMessage {
	b, err := json.Marshal(apitypes.FromVQT("", v))
	if err != nil {
		return nil
	}
	return b
}

// auditAdmin records an administrative change; a record that cannot be
// queued is logged as lost.
func (s *System) auditAdmin(g auth.Grant, action, target string, detail any) {
	rec := store.AuditRecord{Time: time.Now().UTC(), Principal: g.Principal, Realm: string(g.Realm),
		Origin: g.Origin, Action: action, Target: target, Result: "ok"}
	if detail != nil {
		if b, err := json.Marshal(detail); err == nil {
			rec.After = b
		}
	}
	if err := s.Audit.Enqueue(rec); err != nil {
		s.Log.Error("audit record lost", slog.String("action", action), slog.Any("err", err))
	}
}

// refusals audits requests and script calls refused for a missing scope,
// level or permission: one record each (DESIGN.md, Audit). The API
// middleware and the sandbox dispatcher call it.
type refusals struct{ s *System }

func (r refusals) AuditRefusal(_ context.Context, g auth.Grant, target string, reason error) {
	r.s.auditRefusal(g, target, reason)
}

func (s *System) auditRefusal(g auth.Grant, target string, reason error) {
	rec := store.AuditRecord{Time: time.Now().UTC(), Principal: g.Principal, Realm: string(g.Realm),
		Origin: g.Origin, Action: "refused", Target: target, Result: "refused", Detail: reason.Error()}
	if script, ok := scriptOf(g.Origin); ok {
		rec.Script = script
	}
	if err := s.Audit.Enqueue(rec); err != nil {
		s.Log.Error("audit record lost", slog.String("action", "refused"), slog.Any("err", err))
	}
}

// auditAPI lists the audit log for GET /api/v1/audit.
type auditAPI struct{ s *System }

func (a auditAPI) AuditRecords(_ context.Context, after uint64, limit int) ([]apitypes.AuditRecord, error) {
	recs, err := a.s.DB.AuditRecords(after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]apitypes.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = apitypes.AuditRecord{Seq: r.Seq, Time: r.Time, Principal: r.Principal, Realm: r.Realm, Origin: r.Origin,
			Script: r.Script, Action: r.Action, Target: r.Target, Before: r.Before, After: r.After, Result: r.Result, Detail: r.Detail}
	}
	return out, nil
}
