package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// permAuth: "designer" holds the designer permission only, "reader"
// tag:read only, "nothing" neither.
type permAuth struct{}

func (permAuth) Authenticate(_ context.Context, bearer string) (auth.Grant, error) {
	g := auth.Grant{Principal: bearer, Realm: auth.RealmAPIKey, WriteLevel: auth.LevelDesign}
	switch bearer {
	case "designer":
		g.Permissions = []auth.Permission{auth.Designer}
	case "reader":
		g.Scopes = []auth.Scope{auth.TagRead}
	case "nothing":
	default:
		return auth.Grant{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	return g, nil
}

// fakeProject records calls; err, when set, is every call's answer.
type fakeProject struct {
	calls []string
	err   error
}

var testChanges = gateway.ProjectChanges{Tags: gateway.ChangeSet{Added: []string{"Line1/New"}}}

func (f *fakeProject) ImportProject(_ context.Context, g auth.Grant, doc []byte) (gateway.ProjectChanges, error) {
	f.calls = append(f.calls, "project "+g.Principal+" "+string(doc))
	return testChanges, f.err
}

func (f *fakeProject) ExportProject(context.Context) ([]byte, error) {
	f.calls = append(f.calls, "export project")
	return []byte("devices: []\n"), f.err
}

func (f *fakeProject) ImportTags(_ context.Context, g auth.Grant, format string, doc []byte) (gateway.ProjectChanges, error) {
	f.calls = append(f.calls, "tags "+format+" "+string(doc))
	return testChanges, f.err
}

func (f *fakeProject) ExportTags(_ context.Context, format string) ([]byte, error) {
	f.calls = append(f.calls, "export tags "+format)
	return []byte("doc:" + format), f.err
}

func (f *fakeProject) BrowseDevice(_ context.Context, _ auth.Grant, name, node string) ([]gateway.BrowseNode, error) {
	f.calls = append(f.calls, "browse "+name+" "+node)
	switch name {
	case "nope":
		return nil, fmt.Errorf("device %q: %w", name, ErrNotFound)
	case "plc":
		return nil, fmt.Errorf("device %q: driver cannot browse: %w", name, ErrInvalid)
	}
	return []gateway.BrowseNode{{NodeID: "nsu=urn:x;s=A", BrowseName: "A", NodeClass: "Variable", DataType: "Double"}}, f.err
}

func newProjectEnv(t *testing.T) (*Server, *fakeProject) {
	t.Helper()
	fp := &fakeProject{}
	s, err := New(Config{Now: func() time.Time { return testNow }}, Deps{Auth: permAuth{}, Project: fp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, fp
}

func newProjectReq(t *testing.T, method, path, token, body string) *http.Request {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func serveProject(s *Server, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

func TestProjectRoutes_Need_DesignerOrTagRead(t *testing.T) {
	s, _ := newProjectEnv(t)
	tests := []struct {
		method, path, body string
		designer, reader   int
	}{
		{"POST", "/api/v1/project/import", "devices: []\n", 200, 403},
		{"GET", "/api/v1/project/export", "", 200, 403},
		{"POST", "/api/v1/tags/import?format=csv", "path,device,address\n", 200, 403},
		{"GET", "/api/v1/tags/export", "", 200, 403},
		{"GET", "/api/v1/devices/ua1/browse", "", 403, 200},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			for tok, want := range map[string]int{"designer": tt.designer, "reader": tt.reader, "nothing": 403, "": 401} {
				rec := doReq(t, s, tt.method, tt.path, tok, tt.body)
				if rec.Code != want {
					t.Errorf("token %q: status %d, want %d (%s)", tok, rec.Code, want, rec.Body)
				}
				if want == 403 {
					if p := problemOf(t, rec); !strings.Contains(p.Detail, map[bool]string{true: "tag:read", false: "designer"}[tt.reader == 200]) {
						t.Errorf("token %q: 403 detail %q does not name what is missing", tok, p.Detail)
					}
				}
			}
		})
	}
}

// TestProjectRoutes_Import_400ListsEveryError: a refused import answers
// 400 with every problem and its line, in the detail and as a list.
func TestProjectRoutes_Import_400ListsEveryError(t *testing.T) {
	s, fp := newProjectEnv(t)
	fp.err = &ProjectError{Problems: []gateway.Problem{
		{Line: 3, Message: `line 3: tag "A": scale "x": want factor`},
		{Line: 7, Message: `line 7: tag "B": unknown device "plc9"`},
		{Message: "no tags list"},
	}}
	for _, path := range []string{"/api/v1/project/import", "/api/v1/tags/import?format=yaml"} {
		t.Run(path, func(t *testing.T) {
			rec := doReq(t, s, "POST", path, "designer", "tags: []\n")
			if rec.Code != 400 || rec.Header().Get("Content-Type") != apitypes.ProblemContentType {
				t.Fatalf("status %d %s: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
			var p apitypes.InvalidProjectProblem
			dec := json.NewDecoder(rec.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			if p.Kind != KindInvalid || p.Status != 400 || len(p.Errors) != 3 || p.Errors[0].Line != 3 || p.Errors[1].Line != 7 {
				t.Fatalf("problem = %+v", p)
			}
			for _, e := range p.Errors {
				if !strings.Contains(p.Detail, e.Message) {
					t.Errorf("detail %q lacks %q", p.Detail, e.Message)
				}
			}
		})
	}
}

func TestProjectRoutes_Import_OK(t *testing.T) {
	s, fp := newProjectEnv(t)
	rec := doReq(t, s, "POST", "/api/v1/project/import", "designer", "devices: []\n")
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := `{"devices":{"added":[],"changed":[],"removed":[]},"tags":{"added":["Line1/New"],"changed":[],"removed":[]},"restart_required":[]}`
	if got := strings.TrimSpace(rec.Body.String()); got != want {
		t.Fatalf("body %s\nwant %s", got, want)
	}
	if len(fp.calls) != 1 || fp.calls[0] != "project designer devices: []\n" {
		t.Fatalf("calls %q", fp.calls)
	}
	if rec := doReq(t, s, "POST", "/api/v1/project/import", "designer", " \n"); rec.Code != 400 {
		t.Fatalf("empty body: %d %s", rec.Code, rec.Body)
	}
}

func TestProjectRoutes_TagFormat(t *testing.T) {
	tests := []struct {
		name, path, contentType string
		status                  int
		call                    string
	}{
		{"query csv", "/api/v1/tags/import?format=csv", "", 200, "tags csv x"},
		{"query yaml", "/api/v1/tags/import?format=yaml", "text/csv", 200, "tags yaml x"},
		{"content type csv", "/api/v1/tags/import", "text/csv; charset=utf-8", 200, "tags csv x"},
		{"content type yaml", "/api/v1/tags/import", "application/yaml", 200, "tags yaml x"},
		{"content type json", "/api/v1/tags/import", "application/json", 200, "tags yaml x"},
		{"none", "/api/v1/tags/import", "", 400, ""},
		{"bad format", "/api/v1/tags/import?format=xlsx", "", 400, ""},
		{"unknown parameter", "/api/v1/tags/import?format=csv&mode=x", "", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fp := newProjectEnv(t)
			req := newProjectReq(t, "POST", tt.path, "designer", "x")
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := serveProject(s, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.call != "" && (len(fp.calls) != 1 || fp.calls[0] != tt.call) {
				t.Fatalf("calls %q, want %q", fp.calls, tt.call)
			}
			if tt.status == 400 && len(fp.calls) != 0 {
				t.Fatalf("refused request reached the project: %q", fp.calls)
			}
		})
	}
}

func TestProjectRoutes_Export(t *testing.T) {
	s, _ := newProjectEnv(t)
	tests := []struct{ path, ct, body string }{
		{"/api/v1/project/export", apitypes.YAMLContentType, "devices: []\n"},
		{"/api/v1/tags/export", apitypes.CSVContentType, "doc:csv"},
		{"/api/v1/tags/export?format=csv", apitypes.CSVContentType, "doc:csv"},
		{"/api/v1/tags/export?format=yaml", apitypes.YAMLContentType, "doc:yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := doReq(t, s, "GET", tt.path, "designer", "")
			if rec.Code != 200 || rec.Header().Get("Content-Type") != tt.ct || rec.Body.String() != tt.body {
				t.Fatalf("= %d %q %q, want 200 %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tt.ct, tt.body)
			}
		})
	}
}

func TestProjectRoutes_Browse(t *testing.T) {
	s, fp := newProjectEnv(t)
	tests := []struct {
		path   string
		status int
		kind   string
	}{
		{"/api/v1/devices/ua1/browse?node=ns%3D2%3Bs%3DPlc", 200, ""},
		{"/api/v1/devices/nope/browse", 404, KindNotFound},
		{"/api/v1/devices/plc/browse", 400, KindInvalid},
		{"/api/v1/devices/ua1/browse?depth=2", 400, KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := doReq(t, s, "GET", tt.path, "reader", "")
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.kind != "" {
				if p := problemOf(t, rec); p.Kind != tt.kind {
					t.Fatalf("kind %q, want %q", p.Kind, tt.kind)
				}
				return
			}
			var nodes []apitypes.BrowseNode
			if err := json.Unmarshal(rec.Body.Bytes(), &nodes); err != nil || len(nodes) != 1 || nodes[0].NodeClass != "Variable" {
				t.Fatalf("nodes %s: %v", rec.Body, err)
			}
		})
	}
	if fp.calls[0] != "browse ua1 ns=2;s=Plc" {
		t.Fatalf("first call %q: node not passed through", fp.calls[0])
	}
}

func TestProjectRoutes_NoDeps_NotImplemented(t *testing.T) {
	s, err := New(Config{Now: func() time.Time { return testNow }}, Deps{Auth: permAuth{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range projectRoutes {
		path := strings.ReplaceAll(rt.path, "{name}", "x")
		tok := "designer"
		if rt.need.scope != "" {
			tok = "reader"
		}
		rec := doReq(t, s, rt.method, path+"?format=csv", tok, "x")
		if rt.method == "GET" && strings.Contains(path, "browse") {
			rec = doReq(t, s, rt.method, path, tok, "")
		}
		if rec.Code != http.StatusNotImplemented {
			t.Errorf("%s: status %d, want 501", rt.pattern(), rec.Code)
		}
	}
}
