package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// Tokens the fake authenticator knows.
const (
	tokFull     = "tok-full"
	tokReader   = "tok-reader"
	tokExpired  = "tok-expired"
	tokOperator = "tok-operator" // tag:read, tag:write, script:execute at operate, prefix Line1
	tokBroken   = "tok-broken"   // the credential store fails
)

var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, bearer string) (auth.Grant, error) {
	switch bearer {
	case tokFull:
		return auth.Full("admin", auth.RealmPlatform, "rest"), nil
	case tokReader:
		return auth.Grant{Principal: "reader", Realm: auth.RealmAPIKey, Scopes: []auth.Scope{auth.TagRead}, WriteLevel: auth.LevelView}, nil
	case tokOperator:
		return auth.Grant{Principal: "op", Realm: auth.RealmAPIKey, WriteLevel: auth.LevelOperate,
			Scopes:   []auth.Scope{auth.TagRead, auth.TagWrite, auth.ScriptExecute},
			Prefixes: []string{"Line1"}, Permissions: []auth.Permission{auth.UsersAdmin}}, nil
	case tokExpired:
		g := auth.Full("old", auth.RealmAPIKey, "rest")
		g.Expires = testNow.Add(-time.Second)
		return g, nil
	case tokBroken:
		return auth.Grant{}, fmt.Errorf("key store: %w", context.DeadlineExceeded)
	}
	return auth.Grant{}, fmt.Errorf("api key: %w", ErrUnauthenticated)
}

type fakeTags struct {
	mu       sync.Mutex
	values   map[string]value.Value
	written  []apitypes.TagWrite
	writeErr error
	delay    time.Duration
}

func (f *fakeTags) ListTags(context.Context, auth.Grant) []apitypes.TagInfo {
	return []apitypes.TagInfo{{Path: "Line1/Pump/Speed", Device: "plc1", Address: "HR100", Type: "float32", WriteLevel: "supervise"}}
}

func (f *fakeTags) ReadTags(_ context.Context, g auth.Grant, paths []string) []apitypes.TagValue {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]apitypes.TagValue, len(paths))
	for i, p := range paths {
		v, ok := f.values[p]
		switch {
		case !g.AllowsPath(p):
			out[i] = apitypes.FromVQT(p, value.Bad(value.BadUserAccessDenied, "outside prefixes", testNow))
		case !ok:
			out[i] = apitypes.FromVQT(p, value.Bad(value.BadNodeIDUnknown, "unknown tag", testNow))
		default:
			out[i] = apitypes.FromVQT(p, value.VQT{Value: v, Quality: value.Good, Time: testNow})
		}
	}
	return out
}

func (f *fakeTags) WriteTags(_ context.Context, g auth.Grant, writes []apitypes.TagWrite) ([]apitypes.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeErr != nil {
		return nil, f.writeErr
	}
	out := make([]apitypes.WriteResult, len(writes))
	for i, w := range writes {
		if !g.AllowsPath(w.Path) {
			out[i] = apitypes.WriteResult{Path: w.Path, Status: "Bad_UserAccessDenied", Reason: "outside prefixes"}
			continue
		}
		f.written = append(f.written, w)
		if f.values == nil {
			f.values = map[string]value.Value{}
		}
		f.values[w.Path] = w.Value
		out[i] = apitypes.WriteResult{Path: w.Path, Status: "Good"}
	}
	return out, nil
}

// scriptErr is a ScriptError as the sandbox adapter returns it.
type scriptErr struct{ kind, detail string }

func (e *scriptErr) Error() string  { return e.kind + ": " + e.detail }
func (e *scriptErr) Kind() string   { return e.kind }
func (e *scriptErr) Detail() string { return e.detail }

type fakeScripts struct {
	err     error
	delay   time.Duration
	gotArgs json.RawMessage
}

func (f *fakeScripts) SaveScript(_ context.Context, _ auth.Grant, module, _ string) (apitypes.ScriptSaved, error) {
	if f.err != nil {
		return apitypes.ScriptSaved{}, f.err
	}
	return apitypes.ScriptSaved{Module: module, Version: 3, Entries: []apitypes.ScriptEntry{{Name: "start", TimeoutMS: 2000}}}, nil
}

func (f *fakeScripts) RunScript(ctx context.Context, _ auth.Grant, _, _ string, args json.RawMessage) (apitypes.ScriptRun, error) {
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return apitypes.ScriptRun{}, ctx.Err()
		}
	}
	if f.err != nil {
		return apitypes.ScriptRun{}, f.err
	}
	f.gotArgs = args
	return apitypes.ScriptRun{Result: json.RawMessage(`{"ok":true}`), DurationMS: 12,
		Logs: []apitypes.LogLine{{Level: "info", Msg: "hello"}}}, nil
}

func (f *fakeScripts) ListScripts(context.Context, auth.Grant) ([]apitypes.ScriptInfo, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []apitypes.ScriptInfo{{Module: "pumps", Version: 3}}, nil
}

func (f *fakeScripts) LintScript(context.Context, string) (apitypes.LintResult, error) {
	if f.err != nil {
		return apitypes.LintResult{}, f.err
	}
	return apitypes.LintResult{Linter: "syntax-only"}, nil
}

type fakeKeys struct {
	created []apitypes.APIKeyRequest
}

func (f *fakeKeys) CreateAPIKey(_ context.Context, _ auth.Grant, req apitypes.APIKeyRequest) (apitypes.APIKeyCreated, error) {
	f.created = append(f.created, req)
	return apitypes.APIKeyCreated{ID: "k1", Token: "qk_secret"}, nil
}

func (f *fakeKeys) ListAPIKeys(context.Context) ([]apitypes.APIKeyInfo, error) {
	return []apitypes.APIKeyInfo{{ID: "k1", Name: "scada", Scopes: []string{"tag:read"}, WriteLevel: "view", Created: testNow}}, nil
}

func (f *fakeKeys) RevokeAPIKey(_ context.Context, id string) error {
	if id != "k1" {
		return fmt.Errorf("api key %q: %w", id, ErrNotFound)
	}
	return nil
}

type fakeHealth struct{ h apitypes.Health }

func (f fakeHealth) Health(context.Context) apitypes.Health { return f.h }

type fakeDevices struct{}

func (fakeDevices) ListDevices(context.Context) []apitypes.DeviceInfo {
	return []apitypes.DeviceInfo{{Name: "plc1", Driver: "modbus", State: "connected", Tags: 4}}
}

func (fakeDevices) DevicePlan(_ context.Context, name string) ([]apitypes.PlannedRequest, error) {
	if name != "plc1" {
		return nil, fmt.Errorf("device %q: %w", name, ErrNotFound)
	}
	return []apitypes.PlannedRequest{{Scan: "1s", FunctionCode: 3, UnitID: 1, Start: 0, Count: 2, Tags: []string{"A"}}}, nil
}

type env struct {
	srv     *Server
	tags    *fakeTags
	scripts *fakeScripts
	keys    *fakeKeys
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{tags: &fakeTags{values: map[string]value.Value{}}, scripts: &fakeScripts{}, keys: &fakeKeys{}}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	s, err := New(cfg, Deps{Auth: fakeAuth{}, Tags: e.tags, Scripts: e.scripts, APIKeys: e.keys,
		Health: fakeHealth{apitypes.Health{Status: "ok", Version: "1.2.3"}}, Devices: fakeDevices{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = s
	return e
}

// do sends one request through the handler and returns the recorder.
func (e *env) do(t *testing.T, method, path, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// problemOf decodes a problem answer, failing the test when it is not one.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) apitypes.Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != apitypes.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %q (body %s)", ct, apitypes.ProblemContentType, rec.Body)
	}
	var p apitypes.Problem
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem: %v", err)
	}
	if p.Status != rec.Code || p.Type == "" || p.Title == "" || p.Kind == "" || p.Detail == "" {
		t.Fatalf("incomplete problem %+v for status %d", p, rec.Code)
	}
	return p
}
