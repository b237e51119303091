package api

import (
	"net/http"
	"strconv"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// consoleRoutes are the routes the engineer's console added
// (docs/console.md; testdata/routes.md, "Routes added by the console"):
// a module's stored source for the editor, its versions and the source of
// each for the diff (designer, like the other script routes), and a
// filtered search of the audit log, newest first (users_admin, like GET
// /audit). They answer 501 when the dependency is nil. routes.go's table
// gets them through the init below, so the middleware enforces their rows
// like every other's and routes_test.go checks them against the
// contract's route table.
var consoleRoutes = []route{
	{method: "GET", path: prefix + "/scripts/{module}", need: perm(auth.Designer), handle: (*Server).scriptCode},
	{method: "GET", path: prefix + "/scripts/{module}/versions", need: perm(auth.Designer), handle: (*Server).scriptVersions},
	{method: "GET", path: prefix + "/scripts/{module}/versions/{version}", need: perm(auth.Designer), handle: (*Server).scriptVersionCode},
	{method: "GET", path: prefix + "/audit/search", need: perm(auth.UsersAdmin), handle: (*Server).searchAudit},
}

func init() { routes = append(routes, consoleRoutes...) }

// notAvailable is the 501 of a console route whose dependency is nil.
func notAvailable(r *http.Request, what string) error {
	return errorf(http.StatusNotImplemented, KindNotImplemented, "%s %s is not available in this daemon (%s)", r.Method, r.URL.Path, what)
}

// scriptCode answers GET /scripts/{module}: the latest version's source,
// entries and LiveView entries.
func (s *Server) scriptCode(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if s.deps.ScriptCodes == nil || s.deps.Scripts == nil {
		return notAvailable(r, "script sources")
	}
	module := r.PathValue("module")
	if err := checkName("module", module); err != nil {
		return err
	}
	sc, err := s.deps.ScriptCodes.ScriptCode(r.Context(), g, module, 0)
	if err != nil {
		return err
	}
	out := wireScriptCode(sc)
	list, err := s.deps.Scripts.ListScripts(r.Context(), g)
	if err != nil {
		return err
	}
	for _, si := range list {
		if si.Module == module && si.Version == sc.Version {
			out.Entries, out.LiveView = wireEntries(si.Entries), si.LiveView
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// scriptVersions answers GET /scripts/{module}/versions, oldest first.
func (s *Server) scriptVersions(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if s.deps.Scripts == nil {
		return notAvailable(r, "scripts")
	}
	module := r.PathValue("module")
	if err := checkName("module", module); err != nil {
		return err
	}
	vs, err := s.deps.Scripts.ScriptVersions(r.Context(), g, module)
	if err != nil {
		return err
	}
	out := make([]apitypes.ScriptVersionInfo, len(vs))
	for i, v := range vs {
		out[i] = apitypes.ScriptVersionInfo{Version: v.Version, Saved: v.Saved.UTC(), Latest: i == len(vs)-1}
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// scriptVersionCode answers GET /scripts/{module}/versions/{version}.
func (s *Server) scriptVersionCode(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if s.deps.ScriptCodes == nil {
		return notAvailable(r, "script sources")
	}
	module := r.PathValue("module")
	if err := checkName("module", module); err != nil {
		return err
	}
	v, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || v < 1 {
		return errorf(http.StatusBadRequest, KindInvalid, "version %q: want a version number from 1", r.PathValue("version"))
	}
	sc, err := s.deps.ScriptCodes.ScriptCode(r.Context(), g, module, v)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, wireScriptCode(sc))
	return nil
}

func wireScriptCode(sc gateway.ScriptCode) apitypes.ScriptCode {
	return apitypes.ScriptCode{Module: sc.Module, Version: sc.Version, Saved: sc.Saved.UTC(), Code: sc.Code}
}

// searchAudit answers GET /audit/search?principal=&origin=&action=&result=
// &since=&until=&before=&limit=: the matching records, newest first
// (gateway.AuditQuery says how each filter matches; since and until are
// RFC 3339).
func (s *Server) searchAudit(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	if s.deps.AuditSearch == nil {
		return notAvailable(r, "audit search")
	}
	q := r.URL.Query()
	aq := gateway.AuditQuery{Principal: q.Get("principal"), Origin: q.Get("origin"), Action: q.Get("action"),
		Result: q.Get("result"), Limit: 100}
	for name, dst := range map[string]*time.Time{"since": &aq.Since, "until": &aq.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return errorf(http.StatusBadRequest, KindInvalid, "%s=%q: want an RFC 3339 time (2024-05-01T08:00:00Z)", name, v)
			}
			*dst = t.UTC()
		}
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return errorf(http.StatusBadRequest, KindInvalid, "before=%q: want a sequence number from 1", v)
		}
		aq.Before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > gateway.MaxAuditSearch {
			return errorf(http.StatusBadRequest, KindInvalid, "limit=%q: want 1 to %d", v, gateway.MaxAuditSearch)
		}
		aq.Limit = n
	}
	recs, err := s.deps.AuditSearch.SearchAudit(r.Context(), aq)
	if err != nil {
		return err
	}
	page := apitypes.AuditPage{Records: make([]apitypes.AuditRecord, len(recs))}
	for i, rec := range recs {
		page.Records[i] = wireAudit(rec)
	}
	if len(recs) == aq.Limit && recs[len(recs)-1].Seq > 1 {
		next := recs[len(recs)-1].Seq
		page.NextBefore = &next
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, page)
	return nil
}
