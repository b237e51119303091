package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// flowRoutes are the routes of the flows (docs/flows.md, "REST and
// qubiqctl"; the route table, testdata/routes.md: "GET /flows | tag:read",
// "flows (create/change/delete) | designer", "POST /flows/{name}/reset |
// designer"). Each translates to one gateway.Flows call; the flow engine
// checks the names (flow.CheckName) and the definitions. They answer 501
// without Deps.Flows.
var flowRoutes = []route{
	{method: "GET", path: prefix + "/flows", need: scope(auth.TagRead), handle: (*Server).listFlows},
	{method: "GET", path: prefix + "/flows/{name}", need: scope(auth.TagRead), handle: (*Server).getFlow},
	{method: "PUT", path: prefix + "/flows/{name}", need: perm(auth.Designer), handle: (*Server).saveFlow},
	{method: "DELETE", path: prefix + "/flows/{name}", need: perm(auth.Designer), handle: (*Server).deleteFlow},
	{method: "POST", path: prefix + "/flows/{name}/rollback", need: perm(auth.Designer), handle: (*Server).rollbackFlow},
	{method: "POST", path: prefix + "/flows/{name}/reset", need: perm(auth.Designer), handle: (*Server).resetFlow},
	{method: "GET", path: prefix + "/flows/{name}/versions", need: perm(auth.Designer), handle: (*Server).flowVersions},
	{method: "GET", path: prefix + "/flows/{name}/definition", need: perm(auth.Designer), handle: (*Server).flowDefinition},
}

func init() { routes = append(routes, flowRoutes...) }

// flows returns the dependency, or the 501 its routes answer without one.
func (s *Server) flowsDep(r *http.Request) (gateway.Flows, error) {
	if s.deps.Flows == nil {
		return nil, errorf(http.StatusNotImplemented, KindNotImplemented,
			"%s %s is not available in this daemon (flows)", r.Method, r.URL.Path)
	}
	return s.deps.Flows, nil
}

func wireFlowError(e *gateway.FlowError) *apitypes.FlowError {
	if e == nil {
		return nil
	}
	return &apitypes.FlowError{Time: e.Time, Node: e.Node, Kind: e.Kind, Message: e.Message, Line: e.Line}
}

func wireFlow(st gateway.FlowStatus) apitypes.FlowInfo {
	c := st.Counters
	out := apitypes.FlowInfo{Name: st.Name, Description: st.Description, Version: st.Version, State: st.State,
		Reason: st.Reason, Trigger: st.Trigger, Queue: st.Queue, QueueSize: st.QueueSize,
		Counters: apitypes.FlowCounters{In: c.In, Processed: c.Processed, Out: c.Out, Filtered: c.Filtered,
			Errors: c.Errors, Dropped: c.Dropped, Timeouts: c.Timeouts},
		LastError: wireFlowError(st.LastError), Nodes: make([]apitypes.FlowNode, len(st.Nodes))}
	for i, n := range st.Nodes {
		out.Nodes[i] = apitypes.FlowNode{ID: n.ID, Type: n.Type, State: n.State, Runs: n.Runs, Errors: n.Errors,
			Timeouts: n.Timeouts, LastError: wireFlowError(n.LastError)}
	}
	return out
}

func wireFlowSaved(s gateway.FlowSaved) apitypes.FlowSaved {
	return apitypes.FlowSaved{Name: s.Name, Version: s.Version, Carried: s.Carried, Dropped: s.Dropped}
}

func (s *Server) listFlows(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	all, err := f.ListFlows(r.Context(), g)
	if err != nil {
		return err
	}
	out := make([]apitypes.FlowInfo, len(all))
	for i, st := range all {
		out[i] = wireFlow(st)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) getFlow(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	st, err := f.Flow(r.Context(), g, r.PathValue("name"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireFlow(st))
	return nil
}

// saveFlow stores the definition as the flow's next version (or the one
// named), which replaces the running one. A definition with problems is a
// 400 listing every problem with its line; a grant wider than the
// caller's a 403; a stale version a 409.
func (s *Server) saveFlow(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	var req apitypes.FlowSaveRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	doc := bytes.TrimSpace(req.Definition)
	if len(doc) == 0 || string(doc) == "null" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "definition" (the flow: an object, or its YAML as a string)`)
	}
	if doc[0] == '"' {
		var text string
		if err := json.Unmarshal(doc, &text); err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, `"definition": %v`, err)
		}
		doc = []byte(text)
	}
	saved, err := f.SaveFlow(r.Context(), g, gateway.FlowSource{Name: r.PathValue("name"), Doc: doc, Version: req.Version})
	if err != nil {
		return s.writeProjectError(w, r, err)
	}
	s.writeJSON(w, r, http.StatusOK, wireFlowSaved(saved))
	return nil
}

func (s *Server) deleteFlow(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	saved, err := f.DeleteFlow(r.Context(), g, r.PathValue("name"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireFlowSaved(saved))
	return nil
}

func (s *Server) rollbackFlow(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	var req struct{}
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	saved, err := f.RollbackFlow(r.Context(), g, r.PathValue("name"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireFlowSaved(saved))
	return nil
}

// resetFlow clears the flow's failed nodes (or starts it again when it is
// stopped) and answers its status.
func (s *Server) resetFlow(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	var req struct{}
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	st, err := f.ResetFlow(r.Context(), g, r.PathValue("name"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireFlow(st))
	return nil
}

func (s *Server) flowVersions(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	vs, err := f.FlowVersions(r.Context(), g, r.PathValue("name"))
	if err != nil {
		return err
	}
	out := make([]apitypes.FlowVersion, len(vs))
	for i, v := range vs {
		out[i] = apitypes.FlowVersion{Version: v.Version, Saved: v.Saved, Principal: v.Principal}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// flowDefinition answers a stored version's definition as YAML
// (?version=N; absent: the latest).
func (s *Server) flowDefinition(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	f, err := s.flowsDep(r)
	if err != nil {
		return err
	}
	var v int64
	for k, vals := range r.URL.Query() {
		if k != "version" {
			return errorf(http.StatusBadRequest, KindInvalid, "unknown query parameter %q (want version)", k)
		}
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, KindInvalid, "version %q: want a version number", vals[0])
		}
		v = n
	}
	doc, err := f.FlowDefinition(r.Context(), g, r.PathValue("name"), v)
	if err != nil {
		return err
	}
	s.writeDoc(w, r, apitypes.YAMLContentType, doc)
	return nil
}
