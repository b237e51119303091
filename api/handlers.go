package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagpath"
)

// Handlers: the route table (routes.go) has already checked credentials,
// the route's need, the dependency and the body limit.

// mqttLink answers GET /api/v1/mqtt: the supervisor link's state, the
// "mqtt" object of health (docs/mqtt.md), or 404 when the link is off.
func (s *Server) mqttLink(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	h := wireHealth(s.deps.Health.Health(r.Context()))
	if h.MQTT == nil {
		return errorf(http.StatusNotFound, KindNotFound, "the supervisor link is off (mqtt.brokers is empty; docs/mqtt.md)")
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, h.MQTT)
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	h := wireHealth(s.deps.Health.Health(r.Context()))
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
		h.EscapeHatch = true // the escape hatch is visible
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, status, struct {
		apitypes.Health
		TLS      *apitypes.TLSInfo        `json:"tls,omitempty"`
		Firmware *apitypes.FirmwareStatus `json:"firmware,omitempty"`
	}{h, s.deps.TLS, s.healthFirmware(r)})
	return nil
}

func (s *Server) listTags(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	tags := s.deps.Tags.ListTags(r.Context(), g)
	out := make([]apitypes.TagInfo, len(tags))
	for i, ti := range tags {
		out[i] = wireTagInfo(ti)
	}
	s.writeJSON(w, r, http.StatusOK, out)
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
	s.writeJSON(w, r, http.StatusOK, wireTagValues(vals))
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
	writes := make([]gateway.TagWrite, len(req.Writes))
	for i, wr := range req.Writes {
		writes[i] = gateway.TagWrite{Path: wr.Path, Value: wr.Value}
	}
	res, err := s.deps.Tags.WriteTags(r.Context(), g, writes)
	if err != nil {
		if p, _, internal := classify(err); internal || p.Status >= 500 {
			// a failed write-level lookup refuses the whole
			// call, nothing written, with an error that says to retry.
			return &httpError{status: http.StatusServiceUnavailable, kind: KindUnavailable, retryAfter: true,
				detail: fmt.Sprintf("tag write refused, nothing was written: %v; retry", err)}
		}
		return err
	}
	if len(res) != len(req.Writes) {
		return fmt.Errorf("tags: write returned %d results for %d writes", len(res), len(req.Writes))
	}
	out := make([]apitypes.WriteResult, len(res))
	for i, wr := range res {
		out[i] = apitypes.WriteResult{Path: wr.Path, Status: wr.Quality.String(), Reason: wr.Reason}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// checkName refuses (400) a route's module or entry name that breaks the
// one rule for them (gateway.CheckName).
func checkName(what, v string) error {
	if err := gateway.CheckName(what, v); err != nil {
		return errorf(http.StatusBadRequest, KindInvalid, "%s", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
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
	saved, err := s.deps.Scripts.SaveScript(r.Context(), g, gateway.ScriptSource{Module: module, Code: req.Code})
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireSaved(saved))
	return nil
}

// rollbackScript withdraws a module's latest version; the version before it
// runs again and is the answer (as a save's). A module with one version is
// a 409, an unknown one a 404.
func (s *Server) rollbackScript(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	module := r.PathValue("module")
	if err := checkName("module", module); err != nil {
		return err
	}
	var req struct{}
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	saved, err := s.deps.Scripts.RollbackScript(r.Context(), g, module)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireSaved(saved))
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
		if cs.console {
			return s.runFromConsole(w, r, g, module, entry)
		}
		return s.runFromPanel(w, r, cs, module, entry)
	}
	var req apitypes.ScriptRunRequest
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	args := req.Args // absent: the service gives the entry {}
	run, err := s.deps.Scripts.RunScript(r.Context(), g, module, entry, args)
	if err != nil {
		return err
	}
	s.writeRun(w, r, run)
	return nil
}

// writeRun answers a run that returned: its result (null when empty), its
// logs and its duration.
func (s *Server) writeRun(w http.ResponseWriter, r *http.Request, run gateway.ScriptRun) {
	out := wireRun(run)
	if len(out.Result) == 0 {
		out.Result = json.RawMessage("null")
	}
	s.writeJSON(w, r, http.StatusOK, out)
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
	s.writeJSON(w, r, http.StatusOK, apitypes.LintResult{Linter: res.Linter, Diagnostics: wireDiagnostics(res.Diagnostics)})
	return nil
}

func (s *Server) listScripts(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	list, err := s.deps.Scripts.ListScripts(r.Context(), g)
	if err != nil {
		return err
	}
	out := make([]apitypes.ScriptInfo, len(list))
	for i, si := range list {
		out[i] = apitypes.ScriptInfo{Module: si.Module, Version: si.Version, Entries: wireEntries(si.Entries), LiveView: si.LiveView}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	devs := s.deps.Devices.ListDevices(r.Context())
	out := make([]apitypes.DeviceInfo, len(devs))
	for i, d := range devs {
		out[i] = wireDevice(d)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) getDevice(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	d, err := s.deps.Devices.Device(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireDevice(d))
	return nil
}

func (s *Server) devicePlan(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	plan, err := s.deps.Devices.DevicePlan(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	out := make([]apitypes.PlannedRequest, len(plan))
	for i, st := range plan {
		out[i] = apitypes.PlannedRequest{Scan: st.Scan.String(), FunctionCode: st.FunctionCode, UnitID: st.UnitID,
			Start: st.Start, Count: st.Count, Tags: st.Tags}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.APIKeyRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	key, err := checkKeyRequest(req, g, s.cfg.Now())
	if err != nil {
		return err
	}
	created, err := s.deps.APIKeys.CreateAPIKey(r.Context(), g, key)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store") // the token is shown once
	s.writeJSON(w, r, http.StatusCreated, apitypes.APIKeyCreated{ID: created.ID, Token: created.Token})
	return nil
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	keys, err := s.deps.APIKeys.ListAPIKeys(r.Context())
	if err != nil {
		return err
	}
	out := make([]apitypes.APIKeyInfo, len(keys))
	for i, k := range keys {
		out[i] = wireKey(k)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	id := r.PathValue("id")
	already, err := s.deps.APIKeys.RevokeAPIKey(r.Context(), g, id)
	if err != nil {
		return err
	}
	if !already {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.Done{Already: true, Detail: fmt.Sprintf("api key %q was already revoked; nothing changed", id)})
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
// what: auth.Grant.Covers, nothing a request sends can widen a grant). It
// returns the key asked for.
func checkKeyRequest(req apitypes.APIKeyRequest, g auth.Grant, now time.Time) (gateway.NewAPIKey, error) {
	key, err := keyRequest(req, now)
	if err != nil {
		return key, err
	}
	return key, g.Covers(auth.Grant{Scopes: key.Scopes, Permissions: key.Permissions, WriteLevel: key.WriteLevel,
		Prefixes: key.Prefixes}, "")
}

// keyRequest turns the wire request into the key asked for, refusing (400)
// what is not valid.
func keyRequest(req apitypes.APIKeyRequest, now time.Time) (gateway.NewAPIKey, error) {
	key := gateway.NewAPIKey{Name: req.Name, Prefixes: req.Prefixes}
	bad := func(format string, args ...any) (gateway.NewAPIKey, error) {
		return key, errorf(http.StatusBadRequest, KindInvalid, format, args...)
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
	key.WriteLevel = level
	for _, sc := range req.Scopes {
		scope, err := auth.ParseScope(sc)
		if err != nil {
			return bad("scopes: %v", err)
		}
		key.Scopes = append(key.Scopes, scope)
	}
	for _, p := range req.Permissions {
		perm, err := auth.ParsePermission(p)
		if err != nil {
			return bad("permissions: %v", err)
		}
		key.Permissions = append(key.Permissions, perm)
	}
	for _, p := range req.Prefixes {
		if _, err := tagpath.CleanPrefix(p); err != nil { // the one tag path rule
			return bad("prefixes: %v", err)
		}
	}
	if req.Expires != nil {
		if (auth.Grant{Expires: *req.Expires}).Expired(now) {
			return bad("expires %s is not in the future", req.Expires.UTC().Format(time.RFC3339))
		}
		key.Expires = req.Expires.UTC()
	}
	return key, nil
}

// nonNil returns s, or an empty slice for nil, so lists encode as [] and
// never as null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
