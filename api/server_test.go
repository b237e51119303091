package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

func TestServer_Middleware_Unauthenticated(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		name, header, wantDetail string
	}{
		{"no header", "", "missing credentials"},
		{"basic scheme", "Basic YWRtaW46eA==", `not of the form "Bearer <token>"`},
		{"empty bearer", "Bearer ", `not of the form "Bearer <token>"`},
		{"token without the scheme", "qbk_abc", `not of the form "Bearer <token>"`},
		{"unknown token", "Bearer nope", "invalid, revoked or expired"},
		{"expired grant", "Bearer " + tokExpired, "credentials expired at 2025-03-01T11:59:59Z"},
		{"lowercase scheme, unknown", "bearer nope", "invalid, revoked or expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/v1/tags", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			e.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401", rec.Code)
			}
			if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want Bearer ...", got)
			}
			p := problemOf(t, rec)
			if p.Kind != KindUnauthenticated || !strings.Contains(p.Detail, tt.wantDetail) {
				t.Errorf("problem = %+v, want kind %q and detail containing %q", p, KindUnauthenticated, tt.wantDetail)
			}
		})
	}
}

func TestServer_Middleware_AuthStoreDown(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "GET", "/api/v1/tags", tokBroken, "")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status = %d Retry-After %q, want 503 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	if p := problemOf(t, rec); p.Kind != KindUnavailable {
		t.Errorf("kind = %q, want %q", p.Kind, KindUnavailable)
	}
}

func TestServer_Middleware_Forbidden(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		method, path, token, body, want string
	}{
		{"POST", "/api/v1/tags/write", tokReader, `{"writes":[]}`, `missing scope "tag:write"`},
		{"POST", "/api/v1/scripts/pumps/start/run", tokReader, `{}`, `missing scope "script:execute"`},
		{"PUT", "/api/v1/scripts/pumps", tokOperator, `{"code":"x"}`, `missing permission "designer"`},
		{"GET", "/api/v1/scripts", tokReader, "", `missing permission "designer"`},
		{"POST", "/api/v1/scripts/lint", tokReader, `{"code":"x"}`, `missing permission "designer"`},
		{"GET", "/api/v1/apikeys", tokReader, "", `missing permission "users_admin"`},
		{"DELETE", "/api/v1/apikeys/k1", tokReader, "", `missing permission "users_admin"`},
		{"POST", "/api/v1/provision", tokOperator, `{"password":"x"}`, `missing permission "firmware"`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := e.do(t, tt.method, tt.path, tt.token, tt.body)
			if rec.Code != http.StatusForbidden {
				t.Fatalf("status = %d, want 403 (%s)", rec.Code, rec.Body)
			}
			p := problemOf(t, rec)
			if p.Kind != KindPermissionDenied || !strings.Contains(p.Detail, tt.want) {
				t.Errorf("problem = %+v, want detail containing %q", p, tt.want)
			}
		})
	}
}

func TestServer_Middleware_Public(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "GET", "/api/v1/health", "", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /health without credentials: status %d, want 200", rec.Code)
	}
	var h apitypes.Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || h.Status != "ok" || h.Version != "1.2.3" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	// Arrays and objects are never null on the wire.
	for _, want := range []string{`"reasons":[]`, `"devices":{}`, `"escape_hatch":false`, `"uptime_s":0`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("health body %s lacks %s", rec.Body, want)
		}
	}
}

func TestServer_Health_FailedIs503(t *testing.T) {
	s, err := New(Config{}, Deps{Health: fakeHealth{gateway.HealthReport{Status: "failed", Reasons: []string{"store: open timeout"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/health", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"status":"failed"`) {
		t.Fatalf("status %d body %s, want 503 with the health body", rec.Code, rec.Body)
	}
}

func TestServer_Middleware_BodyTooLarge(t *testing.T) {
	e := newEnv(t, Config{})
	big := `{"paths":["` + strings.Repeat("a", DefaultBodyLimit) + `"]}`
	t.Run("content-length", func(t *testing.T) {
		rec := e.do(t, "POST", "/api/v1/tags/read", tokFull, big)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status = %d, want 413", rec.Code)
		}
		if p := problemOf(t, rec); p.Kind != KindTooLarge || !strings.Contains(p.Detail, "1048576") {
			t.Errorf("problem = %+v", p)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/api/v1/tags/read", io.MultiReader(strings.NewReader(big)))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+tokFull)
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status = %d, want 413", rec.Code)
		}
		problemOf(t, rec)
	})
	t.Run("under the limit", func(t *testing.T) {
		rec := e.do(t, "POST", "/api/v1/tags/read", tokFull, `{"paths":["`+strings.Repeat("a", DefaultBodyLimit-100)+`"]}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status = %d, want 200", rec.Code)
		}
	})
}

// TestServer_Wrap_RouteBodyLimit checks that a route's own limit replaces
// the default.
func TestServer_Wrap_RouteBodyLimit(t *testing.T) {
	e := newEnv(t, Config{})
	rt := route{method: "POST", path: "/x", need: scope(auth.TagRead), bodyLimit: 10,
		handle: func(s *Server, w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
			var v map[string]any
			return decodeBody(r, &v, decodeOpts{})
		}}
	h := e.srv.wrap(rt)
	for _, tt := range []struct {
		body string
		want int
	}{{`{"a":1}`, http.StatusOK}, {`{"a":"0123456789"}`, http.StatusRequestEntityTooLarge}} {
		req := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokFull)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("body %s: status %d, want %d", tt.body, rec.Code, tt.want)
		}
	}
}

func TestServer_Decode_Strict(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		name, path, body, want string
	}{
		{"unknown field", "/api/v1/tags/read", `{"paths":[],"bogus":1}`, `unknown field "bogus"`},
		{"camelCase key", "/api/v1/apikeys", `{"name":"a","scopes":[],"writeLevel":"view"}`, `unknown field "writeLevel"`},
		{"unknown field in a write", "/api/v1/tags/write", `{"writes":[{"path":"a","value":1,"quality":"Good"}]}`, `unknown field "quality"`},
		{"missing value", "/api/v1/tags/write", `{"writes":[{"path":"a"}]}`, `missing "value"`},
		{"object value", "/api/v1/tags/write", `{"writes":[{"path":"a","value":{"x":1}}]}`, "cannot be a JSON object"},
		{"number beyond float64", "/api/v1/tags/write", `{"writes":[{"path":"a","value":1e400}]}`, `tag "a": 1e400 is a number beyond float64's range`},
		{"wrong type", "/api/v1/tags/read", `{"paths":"Line1"}`, `field "paths": got a JSON string, want an array`},
		{"wrong element type", "/api/v1/tags/read", `{"paths":[1]}`, `field "paths": got a JSON number, want a string`},
		{"not an object", "/api/v1/tags/read", `[1]`, "request body is a JSON array"},
		{"trailing data", "/api/v1/tags/read", `{"paths":[]} {}`, "data after the JSON value"},
		{"malformed", "/api/v1/tags/read", `{"paths":[}`, "malformed JSON"},
		{"truncated", "/api/v1/tags/read", `{"paths":[`, "truncated"},
		{"empty", "/api/v1/tags/read", ``, "request body is empty"},
		{"missing paths", "/api/v1/tags/read", `{}`, `missing "paths"`},
		{"missing writes", "/api/v1/tags/write", `{}`, `missing "writes"`},
		{"bad time", "/api/v1/apikeys", `{"name":"a","scopes":[],"write_level":"view","expires":"tomorrow"}`, `time "tomorrow" is not RFC 3339`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.do(t, "POST", tt.path, tokFull, tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400 (%s)", rec.Code, rec.Body)
			}
			p := problemOf(t, rec)
			if p.Kind != KindInvalid || !strings.Contains(p.Detail, tt.want) {
				t.Errorf("problem = %+v, want detail containing %q", p, tt.want)
			}
		})
	}
	if len(e.tags.written) != 0 {
		t.Errorf("refused bodies wrote %v", e.tags.written)
	}
}

func TestServer_ScriptRoutes_ErrorKinds(t *testing.T) {
	kinds := []struct {
		kind  string
		want  int
		retry bool
	}{
		{"timeout", 504, false},
		{"permission_denied", 403, false},
		{"runtime_missing", 503, false},
		{"busy", 503, true},
		{"memory_limit_exceeded", 500, false},
		{"killed", 500, false},
		{"script_error", 422, false},
		{"invalid", 400, false},
		{"not_found", 404, false},
		{"something_new", 500, false},
	}
	calls := []struct{ method, path, body string }{
		{"POST", "/api/v1/scripts/pumps/start/run", `{"args":{"rpm":1200}}`},
		{"PUT", "/api/v1/scripts/pumps", `{"code":"def start(args): pass"}`},
		{"POST", "/api/v1/scripts/lint", `{"code":"x"}`},
		{"GET", "/api/v1/scripts", ``},
	}
	for _, c := range calls {
		for _, k := range kinds {
			t.Run(c.method+" "+c.path+"/"+k.kind, func(t *testing.T) {
				e := newEnv(t, Config{})
				detail := "Traceback: ZeroDivisionError at line 3"
				e.scripts.err = fmt.Errorf("run pumps.start: %w", scriptErr(k.kind, detail))
				rec := e.do(t, c.method, c.path, tokFull, c.body)
				if rec.Code != k.want {
					t.Fatalf("status = %d, want %d", rec.Code, k.want)
				}
				p := problemOf(t, rec)
				if p.Kind != k.kind || p.Detail != detail {
					t.Errorf("problem = %+v, want kind %q detail %q", p, k.kind, detail)
				}
				if got := rec.Header().Get("Retry-After"); (got == "1") != k.retry {
					t.Errorf("Retry-After = %q, want set: %v", got, k.retry)
				}
			})
		}
	}
}

func TestServer_RunScript_OK(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct{ name, body, wantArgs string }{
		{"args", `{"args":{"rpm":18446744073709551615}}`, `{"rpm":18446744073709551615}`},
		{"no body", ``, ``}, // absent: the service layer gives the entry {}
		{"no args", `{}`, ``},
		{"null args", `{"args":null}`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.do(t, "POST", "/api/v1/scripts/pumps/start/run", tokOperator, tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if string(e.scripts.gotArgs) != tt.wantArgs {
				t.Errorf("args = %s, want %s", e.scripts.gotArgs, tt.wantArgs)
			}
			want := `{"result":{"ok":true},"logs":[{"level":"info","msg":"hello"}],"duration_ms":12}`
			if got := strings.TrimSpace(rec.Body.String()); got != want {
				t.Errorf("body = %s, want %s", got, want)
			}
		})
	}
}

func TestServer_ScriptRoutes_BadNames(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "PUT", "/api/v1/scripts/my-module", tokFull, `{"code":"x=1"}`)
	if p := problemOf(t, rec); rec.Code != 400 || !strings.Contains(p.Detail, `module "my-module"`) {
		t.Errorf("status %d problem %+v", rec.Code, p)
	}
	rec = e.do(t, "PUT", "/api/v1/scripts/pumps", tokFull, `{"code":"  "}`)
	if p := problemOf(t, rec); rec.Code != 400 || !strings.Contains(p.Detail, `"code"`) {
		t.Errorf("status %d problem %+v", rec.Code, p)
	}
}

func TestServer_SaveScript_NullListsAreEmpty(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "PUT", "/api/v1/scripts/pumps", tokFull, `{"code":"x = 1"}`)
	want := `{"module":"pumps","version":3,"entries":[{"name":"start","timeout_ms":2000}],"diagnostics":[]}`
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != want {
		t.Errorf("status %d body %s, want %s", rec.Code, got, want)
	}
}

// TestServer_Tags_IntegerExactness sends and reads back integers that a
// float64 cannot hold: 2^53+1 and the uint64 maximum.
func TestServer_Tags_IntegerExactness(t *testing.T) {
	e := newEnv(t, Config{})
	body := `{"writes":[{"path":"Line1/A","value":9007199254740993},{"path":"Line1/B","value":18446744073709551615},` +
		`{"path":"Line1/C","value":-9223372036854775808},{"path":"Line1/D","value":[1,18446744073709551615,2.5]},{"path":"Line1/E","value":1.5e300}]}`
	rec := e.do(t, "POST", "/api/v1/tags/write", tokFull, body)
	if rec.Code != http.StatusOK {
		t.Fatalf("write: status %d: %s", rec.Code, rec.Body)
	}
	wantIn := []value.Value{int64(9007199254740993), uint64(18446744073709551615), int64(-9223372036854775808),
		[]any{int64(1), uint64(18446744073709551615), 2.5}, 1.5e300}
	if len(e.tags.written) != len(wantIn) {
		t.Fatalf("written %v", e.tags.written)
	}
	for i, w := range e.tags.written {
		if !value.Equal(w.Value, wantIn[i]) || fmt.Sprintf("%T", w.Value) != fmt.Sprintf("%T", wantIn[i]) {
			t.Errorf("write %s: value %#v (%T), want %#v (%T)", w.Path, w.Value, w.Value, wantIn[i], wantIn[i])
		}
	}
	if got := strings.TrimSpace(rec.Body.String()); !strings.HasPrefix(got, `[{"path":"Line1/A","status":"Good"}`) {
		t.Errorf("write answer = %s", got)
	}

	rec = e.do(t, "POST", "/api/v1/tags/read", tokFull, `{"paths":["Line1/A","Line1/B","Line1/C","Line1/D","Nope"]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("read: status %d: %s", rec.Code, rec.Body)
	}
	raw := rec.Body.String()
	for _, want := range []string{`"value":9007199254740993,`, `"value":18446744073709551615,`,
		`"value":-9223372036854775808,`, `"value":[1,18446744073709551615,2.5],`,
		`"value":null,"quality":"Bad_NodeIdUnknown","timestamp":"2025-03-01T12:00:00.000000000Z","reason":"unknown tag"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("read answer %s lacks %s", raw, want)
		}
	}
	var got []apitypes.TagValue
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for i, want := range wantIn[:4] {
		if !value.Equal(got[i].Value, want) || fmt.Sprintf("%T", got[i].Value) != fmt.Sprintf("%T", want) {
			t.Errorf("decoded %s = %#v, want %#v", got[i].Path, got[i].Value, want)
		}
	}
}

func TestServer_WriteTags_LookupFailureRefusesAll(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantKind   string
	}{
		{"lookup failed", errors.New("tag levels: store timeout"), 503, KindUnavailable},
		{"unavailable", fmt.Errorf("level lookup: %w", ErrUnavailable), 503, KindUnavailable},
		{"invalid", fmt.Errorf("writes[0]: %w", ErrInvalid), 400, KindInvalid},
		{"denied", &auth.DeniedError{Kind: "level", Need: "design", Target: "Line1/X"}, 403, KindPermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.tags.writeErr = tt.err
			rec := e.do(t, "POST", "/api/v1/tags/write", tokFull, `{"writes":[{"path":"Line1/X","value":1}]}`)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			p := problemOf(t, rec)
			if p.Kind != tt.wantKind {
				t.Errorf("kind = %q, want %q", p.Kind, tt.wantKind)
			}
			if tt.wantStatus == 503 && (!strings.Contains(p.Detail, "nothing was written") || !strings.Contains(p.Detail, "retry") ||
				rec.Header().Get("Retry-After") != "1") {
				t.Errorf("503 detail %q / Retry-After %q must say nothing was written and to retry", p.Detail, rec.Header().Get("Retry-After"))
			}
		})
	}
}

func TestServer_WriteTags_PerTagResults(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "POST", "/api/v1/tags/write", tokOperator, `{"writes":[{"path":"Line1/X","value":true},{"path":"Line10/X","value":"s"}]}`)
	want := `[{"path":"Line1/X","status":"Good"},{"path":"Line10/X","status":"Bad_UserAccessDenied","reason":"outside prefixes"}]`
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != want {
		t.Errorf("status %d body %s, want %s", rec.Code, got, want)
	}
}

func TestServer_CreateAPIKey_Validation(t *testing.T) {
	tests := []struct {
		name, token, body string
		wantStatus        int
		wantDetail        string
	}{
		{"ok", tokFull, `{"name":"scada","scopes":["tag:read","tag:write"],"write_level":"operate","prefixes":["Line1"],"expires":"2030-01-01T00:00:00Z"}`, 201, ""},
		{"unknown scope", tokFull, `{"name":"a","scopes":["tag:read","tag:delete"],"write_level":"view"}`, 400, `unknown scope "tag:delete"`},
		{"unknown level", tokFull, `{"name":"a","scopes":[],"write_level":"admin"}`, 400, `unknown write level "admin"`},
		{"missing level", tokFull, `{"name":"a","scopes":[]}`, 400, `missing "write_level"`},
		{"unknown permission", tokFull, `{"name":"a","scopes":[],"write_level":"view","permissions":["root"]}`, 400, `unknown permission "root"`},
		{"bad prefix", tokFull, `{"name":"a","scopes":[],"write_level":"view","prefixes":["Line1//X"]}`, 400, `"Line1//X"`},
		{"past expiry", tokFull, `{"name":"a","scopes":[],"write_level":"view","expires":"2020-01-01T00:00:00Z"}`, 400, "not in the future"},
		{"missing name", tokFull, `{"scopes":[],"write_level":"view"}`, 400, `missing "name"`},
		{"scope beyond creator", tokOperator, `{"name":"a","scopes":["db:write"],"write_level":"view","prefixes":["Line1"]}`, 403, `scope "db:write"`},
		{"permission beyond creator", tokOperator, `{"name":"a","scopes":[],"write_level":"view","permissions":["designer"],"prefixes":["Line1"]}`, 403, `permission "designer"`},
		{"level beyond creator", tokOperator, `{"name":"a","scopes":["tag:write"],"write_level":"supervise","prefixes":["Line1"]}`, 403, `write level "supervise"`},
		{"no prefixes from a limited creator", tokOperator, `{"name":"a","scopes":["tag:read"],"write_level":"view"}`, 403, "every tag path"},
		{"prefix beyond creator", tokOperator, `{"name":"a","scopes":["tag:read"],"write_level":"view","prefixes":["Line10"]}`, 403, `prefix "Line10"`},
		{"within creator", tokOperator, `{"name":"a","scopes":["tag:read","tag:write"],"write_level":"operate","prefixes":["Line1/Pump"],"permissions":["users_admin"]}`, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			rec := e.do(t, "POST", "/api/v1/apikeys", tt.token, tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantStatus == 201 {
				if got := strings.TrimSpace(rec.Body.String()); got != `{"id":"k1","token":"qk_secret"}` {
					t.Errorf("body = %s", got)
				}
				if len(e.keys.created) != 1 {
					t.Errorf("CreateAPIKey called %d times", len(e.keys.created))
				}
				return
			}
			if p := problemOf(t, rec); !strings.Contains(p.Detail, tt.wantDetail) {
				t.Errorf("detail %q lacks %q", p.Detail, tt.wantDetail)
			}
			if len(e.keys.created) != 0 {
				t.Errorf("a refused request created a key")
			}
		})
	}
}

func TestServer_APIKeys_ListAndRevoke(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "GET", "/api/v1/apikeys", tokFull, "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"id":"k1","name":"scada"`) {
		t.Errorf("list: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "DELETE", "/api/v1/apikeys/k1", tokFull, ""); rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Errorf("revoke k1: %d %s", rec.Code, rec.Body)
	}
	// Revoking a revoked key is idempotent, and says so.
	if rec := e.do(t, "DELETE", "/api/v1/apikeys/old", tokFull, ""); rec.Code != http.StatusOK ||
		strings.TrimSpace(rec.Body.String()) != `{"already":true,"detail":"api key \"old\" was already revoked; nothing changed"}` {
		t.Errorf("revoke a revoked key: %d %s", rec.Code, rec.Body)
	}
	rec = e.do(t, "DELETE", "/api/v1/apikeys/k9", tokFull, "")
	if p := problemOf(t, rec); rec.Code != 404 || p.Kind != KindNotFound || !strings.Contains(p.Detail, `"k9"`) {
		t.Errorf("revoke k9: %d %+v", rec.Code, p)
	}
}

func TestServer_NilDeps_NotImplemented(t *testing.T) {
	s, err := New(Config{}, Deps{Auth: fakeAuth{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range routes {
		if rt.pattern() == "GET /api/v1/openapi.json" {
			continue // the server's own document: it depends on nothing
		}
		t.Run(rt.pattern(), func(t *testing.T) {
			req := httptest.NewRequest(rt.method, strings.NewReplacer("{module}", "m", "{entry}", "e", "{id}", "k1").Replace(rt.path), strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+tokFull)
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusNotImplemented {
				t.Fatalf("status = %d, want 501", rec.Code)
			}
			if p := problemOf(t, rec); p.Kind != KindNotImplemented {
				t.Errorf("kind = %q", p.Kind)
			}
		})
	}
	t.Run("no authenticator", func(t *testing.T) {
		s, err := New(Config{}, Deps{Tags: &fakeTags{}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/tags", nil))
		if rec.Code != http.StatusNotImplemented {
			t.Fatalf("status = %d, want 501", rec.Code)
		}
	})
}

func TestServer_Handler_UnknownRoutes(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		method, path string
		want         int
		allow        string
	}{
		{"GET", "/api/v1/nope", 404, ""},
		{"GET", "/", 404, ""},
		{"GET", "/api/v1/tags/read", 405, "POST"},
		{"DELETE", "/api/v1/tags", 405, "GET"},
		{"POST", "/api/v1/apikeys/k1", 405, "DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := e.do(t, tt.method, tt.path, tokFull, "")
			if rec.Code != tt.want {
				t.Fatalf("status = %d, want %d", rec.Code, tt.want)
			}
			problemOf(t, rec)
			if got := rec.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
}

func TestServer_Wrap_PanicIs500(t *testing.T) {
	e := newEnv(t, Config{})
	h := e.srv.wrap(route{method: "GET", path: "/p", need: public,
		handle: func(*Server, http.ResponseWriter, *http.Request, auth.Grant) error { panic("boom") }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/p", nil))
	if p := problemOf(t, rec); rec.Code != 500 || p.Kind != KindInternal || strings.Contains(p.Detail, "boom") {
		t.Errorf("status %d problem %+v (the panic text must not leak)", rec.Code, p)
	}
}

func TestServer_ListRoutes_OK(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct{ path, token, want string }{
		{"/api/v1/tags", tokReader, `[{"path":"Line1/Pump/Speed","device":"plc1","address":"HR100","type":"float32","write_level":"supervise","read_only":false}]`},
		{"/api/v1/devices", tokReader, `[{"name":"plc1","driver":"modbus","state":"connected","tags":4}]`},
		{"/api/v1/scripts", tokFull, `[{"module":"pumps","version":3,"entries":[]}]`},
		{"/api/v1/devices/plc1", tokReader, `{"name":"plc1","driver":"modbus","state":"connected","tags":4,"stats":{"requests":10,` +
			`"errors":{"timeout":2},"errors_total":2,"timeouts":2,"reconnects":1,"last_good":"2026-12-01T10:00:00Z",` +
			`"latency_p50_ms":1.5,"latency_p99_ms":20,"units":[{"unit_id":2,"breaker":"open","timeouts":3,` +
			`"demoted_until":"2026-12-01T10:00:30Z"}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := e.do(t, "GET", tt.path, tt.token, "")
			if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != tt.want {
				t.Errorf("status %d body %s, want %s", rec.Code, got, tt.want)
			}
		})
	}
}

func TestServer_GetDevice_Unknown(t *testing.T) {
	e := newEnv(t, Config{})
	if rec := e.do(t, "GET", "/api/v1/devices/nope", tokReader, ""); rec.Code != 404 {
		t.Errorf("unknown device: status %d, want 404", rec.Code)
	}
}

func TestNew_Config(t *testing.T) {
	s, err := New(Config{}, Deps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := s.httpServer()
	if hs.ReadHeaderTimeout != 5*time.Second || hs.ReadTimeout != 30*time.Second || hs.WriteTimeout != 30*time.Second ||
		hs.IdleTimeout != 120*time.Second || hs.MaxHeaderBytes != 64<<10 || s.cfg.BodyLimit != 1<<20 {
		t.Errorf("defaults not applied: %+v body limit %d", hs, s.cfg.BodyLimit)
	}
	if _, err := New(Config{ReadTimeout: -1}, Deps{}, nil); err == nil || !strings.Contains(err.Error(), "read_timeout") {
		t.Errorf("negative read timeout: err = %v", err)
	}
}

// serve starts s on a loopback listener and returns its base URL and a stop
// function that returns Serve's error.
func serve(t *testing.T, s *Server) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() error { cancel(); return <-done }
}

func TestServer_Serve_GracefulShutdown(t *testing.T) {
	e := newEnv(t, Config{ShutdownTimeout: 2 * time.Second})
	e.tags.delay = 300 * time.Millisecond
	base, stop := serve(t, e.srv)
	res := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/api/v1/tags/read", strings.NewReader(`{"paths":["a"]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokFull)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		res <- err
	}()
	time.Sleep(100 * time.Millisecond) // the request is in flight
	if err := stop(); err != nil {
		t.Fatalf("Serve returned %v after ctx cancel, want nil", err)
	}
	if err := <-res; err != nil {
		t.Errorf("in-flight request during shutdown: %v", err)
	}
	if _, err := http.Get(base + "/api/v1/health"); err == nil {
		t.Errorf("server still answers after shutdown")
	}
}

// TestServer_Serve_WriteDeadlines checks the server's write timeout and the
// longer one of the script-run route.
func TestServer_Serve_WriteDeadlines(t *testing.T) {
	e := newEnv(t, Config{WriteTimeout: 100 * time.Millisecond, LongWriteTimeout: 3 * time.Second})
	e.tags.delay = 400 * time.Millisecond
	e.scripts.delay = 400 * time.Millisecond
	base, stop := serve(t, e.srv)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	post := func(path, body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokFull)
		return http.DefaultClient.Do(req)
	}
	resp, err := post("/api/v1/scripts/pumps/start/run", `{"args":1}`)
	if err != nil {
		t.Fatalf("run past WriteTimeout: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"result":{"ok":true}`)) {
		t.Errorf("run: %d %s", resp.StatusCode, b)
	}
	resp, err = post("/api/v1/tags/read", `{"paths":["a"]}`)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Errorf("a short route answered after its write timeout; want the connection cut")
	}
}

// TestServer_RollbackScript: a designer rolls a module back to the version
// before; nothing to go back to is a 409; a reader is refused.
func TestServer_RollbackScript(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "POST", "/api/v1/scripts/pumps/rollback", tokFull, "")
	if want := `{"module":"pumps","version":2,"entries":[{"name":"start","timeout_ms":1000}],"diagnostics":[]}`; rec.Code != 200 ||
		strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("rollback: %d %s, want %s", rec.Code, rec.Body, want)
	}
	rec = e.do(t, "POST", "/api/v1/scripts/once/rollback", tokFull, "")
	if p := problemOf(t, rec); rec.Code != 409 || p.Kind != KindConflict || !strings.Contains(p.Detail, "nothing to roll back to") {
		t.Fatalf("rollback of a single version: %d %+v", rec.Code, p)
	}
	if rec := e.do(t, "POST", "/api/v1/scripts/pumps/rollback", tokReader, ""); rec.Code != 403 {
		t.Fatalf("reader: %d", rec.Code)
	}
}
