package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// projectRoutes are the routes of project administration and device
// browsing (the route table, testdata/routes.md: "project, devices, tags
// (create/change/delete), POST /project/import, GET /project/export |
// designer" and "GET /devices/{name}/browse | tag:read"). Tag import and
// export change and show the project, so they need designer too. routes.go
// splices them into THE route table; they answer 501 without
// Deps.Project.
var projectRoutes = []route{
	{method: "POST", path: prefix + "/project/import", need: perm(auth.Designer), bodyLimit: ImportBodyLimit,
		handle: (*Server).importProject},
	{method: "GET", path: prefix + "/project/export", need: perm(auth.Designer), handle: (*Server).exportProject},
	{method: "POST", path: prefix + "/tags/import", need: perm(auth.Designer), bodyLimit: ImportBodyLimit,
		handle: (*Server).importTags},
	{method: "GET", path: prefix + "/tags/export", need: perm(auth.Designer), handle: (*Server).exportTags},
	{method: "GET", path: prefix + "/devices/{name}/browse", need: scope(auth.TagRead), handle: (*Server).browseDevice},
}

// ImportBodyLimit caps the body of POST /project/import and POST
// /tags/import: 16 MiB (some 100,000 tags).
const ImportBodyLimit = 16 << 20

// projectAdmin returns the dependency, or the 501 its routes answer
// without one.
func (s *Server) projectAdmin(r *http.Request) (ProjectAdmin, error) {
	if s.deps.Project == nil {
		return nil, errorf(http.StatusNotImplemented, KindNotImplemented,
			"%s %s is not available in this daemon (project administration)", r.Method, r.URL.Path)
	}
	return s.deps.Project, nil
}

// ProjectError refuses an import: every problem found, each with its line
// (0 for none). The server answers 400, kind "invalid", with the list
// (apitypes.InvalidProjectProblem).
type ProjectError = gateway.ProjectError

// writeProjectError answers a *ProjectError as 400 with every problem, and
// anything else as writeError does.
func (s *Server) writeProjectError(w http.ResponseWriter, r *http.Request, err error) error {
	var pe *ProjectError
	if !errors.As(err, &pe) {
		return err
	}
	problems := make([]apitypes.ProjectProblem, len(pe.Problems))
	for i, pr := range pe.Problems {
		problems[i] = apitypes.ProjectProblem{Line: pr.Line, Message: pr.Message}
	}
	p := apitypes.InvalidProjectProblem{Problem: newProblem(http.StatusBadRequest, KindInvalid, pe.Error()),
		Errors: problems}
	b, merr := json.Marshal(p)
	if merr != nil {
		return merr
	}
	w.Header().Set("Content-Type", apitypes.ProblemContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadRequest)
	if _, err := w.Write(append(b, '\n')); err != nil {
		s.log.DebugContext(r.Context(), "answer not delivered", "route", r.Pattern, "error", err)
	}
	return nil
}

// readDoc reads the whole body (capped by the route's limit: a
// *http.MaxBytesError becomes a 413); an empty body is a 400.
func readDoc(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, errorf(http.StatusBadRequest, KindInvalid, "request body is empty; want the document")
	}
	return b, nil
}

// tagFormat returns the format of a tag document: the "format" query
// parameter (csv or yaml), else for an import the Content-Type (text/csv;
// application/yaml, application/json and the like), else def ("" to
// require one).
func tagFormat(r *http.Request, def string) (string, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "format" {
			return "", errorf(http.StatusBadRequest, KindInvalid, "unknown query parameter %q (want format)", k)
		}
	}
	switch f := q.Get("format"); f {
	case "csv", "yaml":
		return f, nil
	case "":
	default:
		return "", errorf(http.StatusBadRequest, KindInvalid, "format %q: want csv or yaml", f)
	}
	if r.Method == http.MethodPost {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch {
		case mt == "text/csv":
			return "csv", nil
		case strings.Contains(mt, "yaml"), mt == "application/json":
			return "yaml", nil
		}
	}
	if def == "" {
		return "", errorf(http.StatusBadRequest, KindInvalid, "missing format: add ?format=csv or ?format=yaml (or Content-Type text/csv or application/yaml)")
	}
	return def, nil
}

func (s *Server) importProject(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	pa, err := s.projectAdmin(r)
	if err != nil {
		return err
	}
	doc, err := readDoc(r)
	if err != nil {
		return err
	}
	ch, err := pa.ImportProject(r.Context(), g, doc)
	if err != nil {
		return s.writeProjectError(w, r, err)
	}
	s.writeJSON(w, r, http.StatusOK, normChanges(wireChanges(ch)))
	return nil
}

func (s *Server) exportProject(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	pa, err := s.projectAdmin(r)
	if err != nil {
		return err
	}
	doc, err := pa.ExportProject(r.Context())
	if err != nil {
		return err
	}
	s.writeDoc(w, r, apitypes.YAMLContentType, doc)
	return nil
}

func (s *Server) importTags(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	pa, err := s.projectAdmin(r)
	if err != nil {
		return err
	}
	format, err := tagFormat(r, "")
	if err != nil {
		return err
	}
	doc, err := readDoc(r)
	if err != nil {
		return err
	}
	ch, err := pa.ImportTags(r.Context(), g, format, doc)
	if err != nil {
		return s.writeProjectError(w, r, err)
	}
	s.writeJSON(w, r, http.StatusOK, normChanges(wireChanges(ch)))
	return nil
}

func (s *Server) exportTags(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	pa, err := s.projectAdmin(r)
	if err != nil {
		return err
	}
	format, err := tagFormat(r, "csv")
	if err != nil {
		return err
	}
	doc, err := pa.ExportTags(r.Context(), format)
	if err != nil {
		return err
	}
	ct := apitypes.CSVContentType
	if format == "yaml" {
		ct = apitypes.YAMLContentType
	}
	s.writeDoc(w, r, ct, doc)
	return nil
}

func (s *Server) browseDevice(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	pa, err := s.projectAdmin(r)
	if err != nil {
		return err
	}
	for k := range r.URL.Query() {
		if k != "node" {
			return errorf(http.StatusBadRequest, KindInvalid, "unknown query parameter %q (want node)", k)
		}
	}
	nodes, err := pa.BrowseDevice(r.Context(), g, r.PathValue("name"), r.URL.Query().Get("node"))
	if err != nil {
		return err
	}
	out := make([]apitypes.BrowseNode, len(nodes))
	for i, n := range nodes {
		out[i] = apitypes.BrowseNode{NodeID: n.NodeID, BrowseName: n.BrowseName, NodeClass: n.NodeClass, DataType: n.DataType, Writable: n.Writable}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// writeDoc answers a document (YAML, CSV) as it is.
func (s *Server) writeDoc(w http.ResponseWriter, r *http.Request, contentType string, doc []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(doc); err != nil {
		s.log.DebugContext(r.Context(), "answer not delivered", "route", r.Pattern, "error", err)
	}
}

// normChanges makes every list of ch a JSON array, never null.
func normChanges(ch apitypes.ProjectChanges) apitypes.ProjectChanges {
	for _, cs := range []*apitypes.ChangeSet{&ch.Devices, &ch.Tags} {
		cs.Added, cs.Changed, cs.Removed = nonNil(cs.Added), nonNil(cs.Changed), nonNil(cs.Removed)
	}
	ch.RestartRequired = nonNil(ch.RestartRequired)
	return ch
}
