package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/tagpath"
)

// Handlers: the route table (routes.go) has already checked credentials,
// the route's need, the dependency and the body limit.

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	h := s.deps.Health.Health(r.Context())
	if h.Reasons == nil {
		h.Reasons = []string{}
	}
	if h.Devices == nil {
		h.Devices = map[string]apitypes.DeviceHealth{}
	}
	status := http.StatusOK
	if h.Status == apitypes.HealthFailed {
		status = http.StatusServiceUnavailable
	}
	if s.deps.LiveView != nil && s.deps.LiveView.EscapeHatch() {
		h.EscapeHatch = true // DESIGN.md: the escape hatch is visible
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, status, struct {
		apitypes.Health
		TLS *apitypes.TLSInfo `json:"tls,omitempty"`
	}{h, s.deps.TLS})
	return nil
}

func (s *Server) listTags(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	s.writeJSON(w, r, http.StatusOK, nonNil(s.deps.Tags.ListTags(r.Context(), g)))
	return nil
}

func (s *Server) readTags(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.ReadRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Paths == nil {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "paths" (an array of tag paths)`)
	}
	for i, p := range req.Paths {
		if p == "" {
			return errorf(http.StatusBadRequest, KindInvalid, "paths[%d] is empty", i)
		}
	}
	vals := s.deps.Tags.ReadTags(r.Context(), g, req.Paths)
	if len(vals) != len(req.Paths) {
		return fmt.Errorf("tags: read returned %d values for %d paths", len(vals), len(req.Paths))
	}
	s.writeJSON(w, r, http.StatusOK, vals)
	return nil
}

func (s *Server) writeTags(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.WriteRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Writes == nil {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "writes" (an array of {"path", "value"})`)
	}
	for i, wr := range req.Writes {
		if wr.Path == "" {
			return errorf(http.StatusBadRequest, KindInvalid, `writes[%d]: missing "path"`, i)
		}
	}
	res, err := s.deps.Tags.WriteTags(r.Context(), g, req.Writes)
	if err != nil {
		if p, _, internal := classify(err); internal || p.Status >= 500 {
			// DESIGN.md: a failed write-level lookup refuses the whole
			// call, nothing written, with an error that says to retry.
			return &httpError{status: http.StatusServiceUnavailable, kind: KindUnavailable, retryAfter: true,
				detail: fmt.Sprintf("tag write refused, nothing was written: %v; retry", err)}
		}
		return err
	}
	if len(res) != len(req.Writes) {
		return fmt.Errorf("tags: write returned %d results for %d writes", len(res), len(req.Writes))
	}
	s.writeJSON(w, r, http.StatusOK, res)
	return nil
}

// moduleName is a script module or entry name: a Python identifier.
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkName(what, v string) error {
	if !moduleName.MatchString(v) {
		return errorf(http.StatusBadRequest, KindInvalid, "%s %q is not a Python identifier", what, v)
	}
	return nil
}

func (s *Server) saveScript(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	module := r.PathValue("module")
	if err := checkName("module", module); err != nil {
		return err
	}
	var req apitypes.ScriptSaveRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if strings.TrimSpace(req.Code) == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "code" (the module's Python source)`)
	}
	saved, err := s.deps.Scripts.SaveScript(r.Context(), g, module, req.Code)
	if err != nil {
		return err
	}
	saved.Entries = nonNil(saved.Entries)
	saved.Diagnostics = nonNil(saved.Diagnostics)
	s.writeJSON(w, r, http.StatusOK, saved)
	return nil
}

func (s *Server) runScript(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	module, entry := r.PathValue("module"), r.PathValue("entry")
	if err := checkName("module", module); err != nil {
		return err
	}
	if err := checkName("entry", entry); err != nil {
		return err
	}
	if cs, ok := sessionOf(r); ok {
		return s.runFromPanel(w, r, cs, module, entry)
	}
	var req apitypes.ScriptRunRequest
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	args := req.Args
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	run, err := s.deps.Scripts.RunScript(r.Context(), g, module, entry, args)
	if err != nil {
		return err
	}
	if len(run.Result) == 0 {
		run.Result = json.RawMessage("null")
	}
	run.Logs = nonNil(run.Logs)
	s.writeJSON(w, r, http.StatusOK, run)
	return nil
}

func (s *Server) lintScript(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	var req apitypes.LintRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	res, err := s.deps.Scripts.LintScript(r.Context(), req.Code)
	if err != nil {
		return err
	}
	res.Diagnostics = nonNil(res.Diagnostics)
	s.writeJSON(w, r, http.StatusOK, res)
	return nil
}

func (s *Server) listScripts(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	list, err := s.deps.Scripts.ListScripts(r.Context(), g)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].Entries = nonNil(list[i].Entries)
	}
	s.writeJSON(w, r, http.StatusOK, nonNil(list))
	return nil
}

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	s.writeJSON(w, r, http.StatusOK, nonNil(s.deps.Devices.ListDevices(r.Context())))
	return nil
}

func (s *Server) devicePlan(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	plan, err := s.deps.Devices.DevicePlan(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, nonNil(plan))
	return nil
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.APIKeyRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if err := checkKeyRequest(req, g, s.cfg.Now()); err != nil {
		return err
	}
	created, err := s.deps.APIKeys.CreateAPIKey(r.Context(), g, req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store") // the token is shown once
	s.writeJSON(w, r, http.StatusCreated, created)
	return nil
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	keys, err := s.deps.APIKeys.ListAPIKeys(r.Context())
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, nonNil(keys))
	return nil
}

func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	id := r.PathValue("id")
	if err := s.deps.APIKeys.RevokeAPIKey(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) provision(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.ProvisionRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Password == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "password"`)
	}
	if err := s.deps.Provision.Provision(r.Context(), g, req.Password); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkKeyRequest validates a new API key against the contract (400 naming
// the bad value) and against the creator's grant g: a key never gets a
// scope, permission, write level or tag range its creator lacks (403 naming
// what; DESIGN.md: nothing a request sends can widen a grant).
func checkKeyRequest(req apitypes.APIKeyRequest, g auth.Grant, now time.Time) error {
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, KindInvalid, format, args...)
	}
	deny := func(format string, args ...any) error {
		return errorf(http.StatusForbidden, KindPermissionDenied, format, args...)
	}
	if strings.TrimSpace(req.Name) == "" {
		return bad(`missing "name"`)
	}
	if req.WriteLevel == "" {
		return bad(`missing "write_level" (view, operate, supervise or design)`)
	}
	level, err := auth.ParseLevel(req.WriteLevel)
	if err != nil {
		return bad("write_level: %v", err)
	}
	for _, sc := range req.Scopes {
		if _, err := auth.ParseScope(sc); err != nil {
			return bad("scopes: %v", err)
		}
	}
	for _, p := range req.Permissions {
		if _, err := auth.ParsePermission(p); err != nil {
			return bad("permissions: %v", err)
		}
	}
	for _, p := range req.Prefixes {
		if _, err := tagpath.CleanPrefix(p); err != nil { // the one tag path rule
			return bad("prefixes: %v", err)
		}
	}
	if req.Expires != nil && !req.Expires.After(now) {
		return bad("expires %s is not in the future", req.Expires.UTC().Format(time.RFC3339))
	}
	for _, sc := range req.Scopes {
		if !g.HasScope(auth.Scope(sc)) {
			return deny("cannot grant scope %q: the creating grant does not hold it", sc)
		}
	}
	for _, p := range req.Permissions {
		if !g.HasPermission(auth.Permission(p)) {
			return deny("cannot grant permission %q: the creating grant does not hold it", p)
		}
	}
	if level > g.WriteLevel {
		return deny("cannot grant write level %q: above the creating grant's %q", level, g.WriteLevel)
	}
	if len(g.Prefixes) > 0 {
		if len(req.Prefixes) == 0 {
			return deny("cannot grant every tag path: the creating grant is limited to prefixes %q", g.Prefixes)
		}
		for _, p := range req.Prefixes {
			if !g.AllowsPath(strings.TrimSuffix(p, "/")) {
				return deny("cannot grant prefix %q: outside the creating grant's prefixes %q", p, g.Prefixes)
			}
		}
	}
	return nil
}

// nonNil returns s, or an empty slice for nil, so lists encode as [] and
// never as null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
