package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// scopeAuth grants exactly the scopes its token names: "scopes:" followed
// by a comma-separated list (possibly empty).
type scopeAuth struct{}

func (scopeAuth) Authenticate(_ context.Context, bearer string) (auth.Grant, error) {
	list, ok := strings.CutPrefix(bearer, "scopes:")
	if !ok {
		return auth.Grant{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	g := auth.Grant{Principal: "k", Realm: auth.RealmAPIKey, WriteLevel: auth.LevelDesign}
	for _, s := range strings.Split(list, ",") {
		if s != "" {
			g.Scopes = append(g.Scopes, auth.Scope(s))
		}
	}
	return g, nil
}

// fakeData records calls and answers with fixed data.
type fakeData struct {
	mu    sync.Mutex
	calls []string
	vars  map[string]json.RawMessage
	files map[string][]byte
	err   error
}

func (f *fakeData) rec(c string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	return f.err
}

func (f *fakeData) RunNamedQuery(_ context.Context, _ auth.Grant, q gateway.NamedQuery) (json.RawMessage, error) {
	if err := f.rec("named " + q.Name + " " + string(q.Params) + " " + q.Database); err != nil {
		return nil, err
	}
	return json.RawMessage(`[{"id":7}]`), nil
}

func (f *fakeData) History(_ context.Context, _ auth.Grant, q gateway.HistoryQuery) ([]gateway.HistorySeries, error) {
	if err := f.rec(fmt.Sprintf("history %v %s %s %d %s", q.Paths, q.Start.Format(time.RFC3339), q.End.Format(time.RFC3339), q.Interval.Milliseconds(), q.Aggregate)); err != nil {
		return nil, err
	}
	return []gateway.HistorySeries{{Path: q.Paths[0], Aggregate: "avg", Interval: q.Interval, Known: true,
		Points: []gateway.HistoryPoint{{Time: testNow, Value: 1.5, Quality: value.Good}}}}, nil
}

func (f *fakeData) GetVar(_ context.Context, _ auth.Grant, key string) (json.RawMessage, error) {
	if err := f.rec("get " + key); err != nil {
		return nil, err
	}
	v, ok := f.vars[key]
	if !ok {
		return nil, fmt.Errorf("var %q: %w", key, ErrNotFound)
	}
	return v, nil
}

func (f *fakeData) SetVar(_ context.Context, _ auth.Grant, key string, v json.RawMessage) error {
	if err := f.rec("set " + key + " " + string(v)); err != nil {
		return err
	}
	f.vars[key] = v
	return nil
}

func (f *fakeData) DeleteVar(_ context.Context, _ auth.Grant, key string) error {
	return f.rec("delete " + key)
}

func (f *fakeData) IncrVar(_ context.Context, _ auth.Grant, key string, by json.Number) (json.RawMessage, error) {
	if err := f.rec("incr " + key + " " + string(by)); err != nil {
		return nil, err
	}
	return json.RawMessage(`43`), nil
}

func (f *fakeData) ReadFile(_ context.Context, _ auth.Grant, path string, off, n int64) ([]byte, error) {
	if err := f.rec(fmt.Sprintf("read %s %d %d", path, off, n)); err != nil {
		return nil, err
	}
	return f.files[path], nil
}

func (f *fakeData) SaveFile(_ context.Context, _ auth.Grant, path string, data []byte) error {
	if err := f.rec(fmt.Sprintf("save %s %d", path, len(data))); err != nil {
		return err
	}
	f.files[path] = data
	return nil
}

func (f *fakeData) DeleteFile(_ context.Context, _ auth.Grant, path string) error {
	return f.rec("rm " + path)
}

func (f *fakeData) SendMessage(_ context.Context, _ auth.Grant, h string, payload json.RawMessage) (gateway.ScriptRun, error) {
	if err := f.rec("msg " + h + " " + string(payload)); err != nil {
		return gateway.ScriptRun{}, err
	}
	return gateway.ScriptRun{Result: json.RawMessage(`"done"`)}, nil
}

func (f *fakeData) MaxFileBytes() int64 { return 16 }

func newDataEnv(t *testing.T) (*Server, *fakeData) {
	t.Helper()
	fd := &fakeData{vars: map[string]json.RawMessage{"k": json.RawMessage(`{"a":1}`)}, files: map[string][]byte{"a/b.bin": {0, 1, 2}}}
	s, err := New(Config{Now: func() time.Time { return testNow }}, Deps{Auth: scopeAuth{}, Data: fd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, fd
}

func doReq(t *testing.T, s *Server, method, path, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// dataRequests is one well-formed request per data route.
var dataRequests = []struct {
	method, path, body string
	need               auth.Scope
}{
	{"POST", "/api/v1/db/named/batch_by_id", `{"params": {"id": 7}}`, auth.DBRead},
	{"GET", "/api/v1/history?path=Line1/T&start=2025-03-01T00:00:00Z&end=2025-03-02T00:00:00Z&interval_ms=60000&aggregate=avg", "", auth.HistRead},
	{"GET", "/api/v1/vars/k", "", auth.VarsRead},
	{"PUT", "/api/v1/vars/k", `{"value": [1, "x"]}`, auth.VarsWrite},
	{"DELETE", "/api/v1/vars/k", "", auth.VarsWrite},
	{"POST", "/api/v1/vars/k/incr", `{"by": 2}`, auth.VarsWrite},
	{"GET", "/api/v1/files/a/b.bin", "", auth.FileRead},
	{"PUT", "/api/v1/files/a/b.bin", "hello", auth.FileWrite},
	{"DELETE", "/api/v1/files/a/b.bin", "", auth.FileWrite},
	{"POST", "/api/v1/messages/batch_done", `{"payload": {"batch": 7}}`, auth.ScriptExecute},
}

// TestDataRoutes_ScopeMatrix: every data route × every scope set (each
// single scope, none, all): allowed if and only if the set holds the
// route's scope (the route table, testdata/routes.md); a refusal is 403 naming the scope
// and never reaches the service.
func TestDataRoutes_ScopeMatrix(t *testing.T) {
	sets := [][]auth.Scope{nil, auth.AllScopes}
	for _, s := range auth.AllScopes {
		sets = append(sets, []auth.Scope{s})
	}
	// All but one scope, for each scope.
	for i := range auth.AllScopes {
		var rest []auth.Scope
		for j, s := range auth.AllScopes {
			if j != i {
				rest = append(rest, s)
			}
		}
		sets = append(sets, rest)
	}
	if len(dataRequests) != len(dataRoutes) {
		t.Fatalf("%d requests for %d data routes", len(dataRequests), len(dataRoutes))
	}
	for _, rq := range dataRequests {
		for _, set := range sets {
			var names []string
			held := false
			for _, s := range set {
				names = append(names, string(s))
				held = held || s == rq.need
			}
			t.Run(rq.method+" "+rq.path+" "+strings.Join(names, ","), func(t *testing.T) {
				s, fd := newDataEnv(t)
				rec := doReq(t, s, rq.method, rq.path, "scopes:"+strings.Join(names, ","), rq.body)
				if held {
					if rec.Code >= 400 {
						t.Fatalf("with %q: %d %s; want success", rq.need, rec.Code, rec.Body)
					}
					if len(fd.calls) != 1 {
						t.Fatalf("service calls %v; want one", fd.calls)
					}
					return
				}
				if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), string(rq.need)) {
					t.Fatalf("without %q: %d %s; want 403 naming it", rq.need, rec.Code, rec.Body)
				}
				if len(fd.calls) != 0 {
					t.Fatalf("a refused request reached the service: %v", fd.calls)
				}
			})
		}
	}
	// Without credentials: 401 on every route.
	for _, rq := range dataRequests {
		s, _ := newDataEnv(t)
		if rec := doReq(t, s, rq.method, rq.path, "", rq.body); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials: %d", rq.method, rq.path, rec.Code)
		}
	}
}

func TestDataRoutes_Shapes(t *testing.T) {
	s, fd := newDataEnv(t)
	all := "scopes:" + func() string {
		var n []string
		for _, sc := range auth.AllScopes {
			n = append(n, string(sc))
		}
		return strings.Join(n, ",")
	}()
	tests := []struct {
		name, method, path, body string
		code                     int
		want, call               string
	}{
		{"named", "POST", "/api/v1/db/named/q1", `{"params":{"id":7},"database":"pg"}`, 200, `{"rows":[{"id":7}]}`, `named q1 {"id":7} pg`},
		{"named empty body", "POST", "/api/v1/db/named/q1", ``, 200, `{"rows":[{"id":7}]}`, `named q1  `},
		{"history", "GET", "/api/v1/history?path=A&path=B&start=2025-03-01T00:00:00Z&interval_ms=60000&aggregate=avg", "", 200,
			`[{"path":"A","aggregate":"avg","interval_ms":60000,"points":[{"timestamp":"2025-03-01T12:00:00.000000000Z","value":1.5,"quality":"Good"}],"bad":0,"known":true}]`,
			`history [A B] 2025-03-01T00:00:00Z 0001-01-01T00:00:00Z 60000 avg`},
		{"history no start", "GET", "/api/v1/history?path=A", "", 400, `missing \"start\"`, ""},
		{"history bad param", "GET", "/api/v1/history?path=A&start=2025-03-01T00:00:00Z&limit=3", "", 400, `unknown query parameter \"limit\"`, ""},
		{"history bad time", "GET", "/api/v1/history?path=A&start=yesterday", "", 400, `not RFC 3339`, ""},
		{"get var", "GET", "/api/v1/vars/k", "", 200, `{"key":"k","value":{"a":1}}`, "get k"},
		{"get missing var", "GET", "/api/v1/vars/nope", "", 404, `"kind":"not_found"`, "get nope"},
		{"put var", "PUT", "/api/v1/vars/n", `{"value": 5}`, 200, `{"key":"n","value":5}`, "set n 5"},
		{"put var no value", "PUT", "/api/v1/vars/n", `{}`, 400, `missing \"value\"`, ""},
		{"put var unknown key", "PUT", "/api/v1/vars/n", `{"value": 1, "ttl": 3}`, 400, `unknown field`, ""},
		{"incr default", "POST", "/api/v1/vars/n/incr", ``, 200, `{"key":"n","value":43}`, "incr n 1"},
		{"delete var", "DELETE", "/api/v1/vars/n", ``, 204, ``, "delete n"},
		{"get file", "GET", "/api/v1/files/a/b.bin", "", 200, "\x00\x01\x02", "read a/b.bin 0 -1"},
		{"get chunk", "GET", "/api/v1/files/a/b.bin?offset=1&length=1", "", 200, "", "read a/b.bin 1 1"},
		{"offset without length", "GET", "/api/v1/files/a/b.bin?offset=1", "", 400, "offset needs length", ""},
		{"put file", "PUT", "/api/v1/files/x/y.txt", "hello", 200, `{"path":"x/y.txt","size":5}`, "save x/y.txt 5"},
		{"put file too large", "PUT", "/api/v1/files/x/y.txt", strings.Repeat("x", 17), 413, `"kind":"too_large"`, ""},
		{"delete file", "DELETE", "/api/v1/files/x/y.txt", "", 204, "", "rm x/y.txt"},
		{"message", "POST", "/api/v1/messages/h1", `{"payload": [1]}`, 200, `{"result":"done","logs":[],"duration_ms":0}`, "msg h1 [1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd.calls = nil
			rec := doReq(t, s, tt.method, tt.path, all, tt.body)
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("%d %s; want %d containing %s", rec.Code, rec.Body, tt.code, tt.want)
			}
			if got := strings.Join(fd.calls, "|"); got != tt.call {
				t.Fatalf("service calls %q; want %q", got, tt.call)
			}
		})
	}
	// Service refusals keep their meaning.
	fd.err = &auth.DeniedError{Kind: "path", Need: "a path inside the files root", Target: "files.read ../x"}
	if rec := doReq(t, s, "GET", "/api/v1/files/x", all, ""); rec.Code != 403 || !strings.Contains(rec.Body.String(), "files root") {
		t.Fatalf("denied read: %d %s", rec.Code, rec.Body)
	}
}
