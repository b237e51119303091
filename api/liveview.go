package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/api/liveview"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// mountLiveView serves the embedded panel when the daemon has LiveView:
// GET / redirects to /liveview/, GET /liveview/... are the static assets
// (public: they hold no data; the data comes from the API with the
// session's grant).
func (s *Server) mountLiveView() {
	if s.deps.LiveView == nil {
		return
	}
	s.mux.Handle("GET /{$}", http.RedirectHandler("/liveview/", http.StatusFound))
	s.mux.Handle("GET /liveview/", http.StripPrefix("/liveview", liveview.Handler()))
}

// writability says whether g may write the tag ti, and if not, why (the
// missing scope or level, as the panel shows it). have is the caller's
// level as an operator knows it (a LiveView operator's own level; else the
// grant's): an operator below operate, whose grant holds no tag:write, is
// told the level the tag needs rather than a scope.
func writability(g auth.Grant, ti gateway.TagInfo, visible bool, have auth.Level) (bool, string) {
	if !visible {
		return false, "path outside the allowed prefixes"
	}
	if ti.ReadOnly {
		return false, "tag is read-only"
	}
	l := ti.WriteLevel
	if err := g.RequireScope(auth.TagWrite, ti.Path); err != nil {
		if have > auth.LevelNone && have < l {
			return false, fmt.Sprintf("write level %q required (you have %q)", l, have)
		}
		return false, err.Error()
	}
	if !g.AllowsLevel(l) {
		return false, fmt.Sprintf("write level %q required (you have %q)", l, g.WriteLevel)
	}
	return true, ""
}

// listViews answers the views the caller may open, each write control
// marked writable or read-only (with the reason) for the caller's grant.
func (s *Server) listViews(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	cs, isSession := sessionOf(r)
	tags := map[string]gateway.TagInfo{}
	if s.deps.Tags != nil {
		for _, ti := range s.deps.Tags.ListTags(r.Context(), g) {
			tags[ti.Path] = ti
		}
	}
	have := g.WriteLevel
	if isSession && cs.info.Realm == auth.RealmOperator {
		have = cs.info.Level
	}
	out := []apitypes.View{}
	for _, v := range s.deps.LiveView.Views(r.Context()) {
		if isSession && !liveview.MayOpen(v, cs.info.Realm, cs.info.Level) {
			continue
		}
		ws := make([]apitypes.Widget, len(v.Widgets))
		for i, wd := range v.Widgets {
			switch wd.Type {
			case apitypes.WidgetNumeric, apitypes.WidgetBoolean:
				ti, ok := tags[wd.Tag]
				if ok {
					wd.WriteLevel = ti.WriteLevel.String()
				}
				wd.Writable, wd.ReadOnlyReason = writability(g, ti, ok, have)
			case apitypes.WidgetButton:
				wd.Writable = true
			}
			ws[i] = wd
		}
		v.Widgets = ws
		out = append(out, v)
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// panelEvents answers the panel's recent audit events (its own presses,
// writes and refusals; GET /audit stays users_admin's).
func (s *Server) panelEvents(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	name := r.PathValue("panel")
	v, ok := s.findView(r.Context(), name)
	if !ok {
		return errorf(http.StatusNotFound, KindNotFound, "no LiveView panel %q in the project", name)
	}
	if cs, isSession := sessionOf(r); isSession && !liveview.MayOpen(v, cs.info.Realm, cs.info.Level) {
		return &auth.DeniedError{Kind: "level", Need: v.MinLevel, Target: "LiveView panel " + name}
	}
	evs := []apitypes.PanelEvent{}
	if v.Events > 0 {
		recs, err := s.deps.LiveView.PanelEvents(r.Context(), name, v.Events)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			evs = append(evs, wirePanelEvent(rec))
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, nonNil(evs))
	return nil
}

// grantSummary is the grant a panel script ran with, as audited.
type grantSummary struct {
	Principal  string   `json:"principal"`
	Realm      string   `json:"realm"`
	Origin     string   `json:"origin"`
	Scopes     []string `json:"scopes"`
	WriteLevel string   `json:"write_level"`
}

func summarize(g auth.Grant) grantSummary {
	gs := grantSummary{Principal: g.Principal, Realm: string(g.Realm), Origin: g.Origin,
		WriteLevel: g.WriteLevel.String(), Scopes: []string{}}
	for _, sc := range g.Scopes {
		gs.Scopes = append(gs.Scopes, string(sc))
	}
	return gs
}

// runFromPanel runs module.entry for a LiveView session (README: Operators
// and LiveView panels): the session may start only
// an entry that its panel (PanelHeader, a view it may open) exposes with a
// button and that the script lists in `liveview`; the args are the
// button's, never the request's; the script runs with the grant the
// LiveView table derives from the session (wider only under the escape
// hatch, which is then logged and audited). Every press is audited, and
// refused when it cannot be.
func (s *Server) runFromPanel(w http.ResponseWriter, r *http.Request, cs *callerSession, module, entry string) error {
	if s.deps.LiveView == nil {
		return errorf(http.StatusNotImplemented, KindNotImplemented, "LiveView is not available in this daemon")
	}
	target := module + "." + entry
	if cs.panel == "" {
		return errorf(http.StatusForbidden, KindPermissionDenied,
			"a LiveView session starts scripts only from a panel's button (send %s naming the panel)", PanelHeader)
	}
	v, _ := s.findView(r.Context(), cs.panel)
	btn, ok := liveview.Button(v, module, entry)
	if !ok || !s.deps.LiveView.Exposed(module, entry) {
		s.log.InfoContext(r.Context(), "request refused", slog.String("principal", cs.info.User), slog.String("panel", cs.panel),
			slog.String("entry", target), slog.String("reason", "entry not exposed"))
		return errorf(http.StatusForbidden, KindPermissionDenied, "entry %s is not exposed by LiveView panel %q", target, cs.panel)
	}
	var req apitypes.ScriptRunRequest
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	if len(req.Args) > 0 {
		return errorf(http.StatusBadRequest, KindInvalid, "a panel button's args come from the view, not the request")
	}
	args := btn.Args // absent: the service gives the entry {}
	g, widened := auth.LiveViewGrant(cs.info.Session(cs.panel), s.deps.LiveView.EscapeHatch())
	g.Expires = cs.info.Expires
	if err := s.deps.LiveView.CanAudit(); err != nil {
		s.log.ErrorContext(r.Context(), "panel press refused: audit record cannot be queued", slog.String("entry", target), slog.Any("error", err))
		return &httpError{status: http.StatusServiceUnavailable, kind: KindUnavailable, retryAfter: true,
			detail: fmt.Sprintf("press refused: the audit log cannot record it (%v); retry", err)}
	}
	if widened {
		s.log.WarnContext(r.Context(), "escape hatch widened a LiveView script grant", slog.String("env", auth.EscapeHatchEnv),
			slog.String("principal", g.Principal), slog.String("panel", cs.panel), slog.String("entry", target))
	}
	start := time.Now()
	run, runErr := s.deps.Scripts.RunScript(r.Context(), g, module, entry, args)
	ev := gateway.AuditEvent{Action: "liveview.press", Target: target, Result: "ok",
		After: map[string]any{"panel": cs.panel, "entry": target, "label": btn.Label, "args": args, "grant": summarize(g),
			"escape_hatch": widened, "session": cs.info.ShortID(), "duration_ms": time.Since(start).Milliseconds()}}
	ag := g
	ag.Origin = "liveview:" + cs.panel
	if runErr != nil {
		p, _, _ := classify(runErr)
		ev.Result, ev.Detail = p.Kind, p.Detail
	}
	if err := s.deps.LiveView.Audit(r.Context(), ag, ev); err != nil {
		s.log.ErrorContext(r.Context(), "audit record of a panel press lost", slog.String("entry", target),
			slog.String("principal", g.Principal), slog.Any("error", err))
	}
	if runErr != nil {
		return runErr
	}
	s.writeRun(w, r, run)
	return nil
}
