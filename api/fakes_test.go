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
	"qubiq.dev/edge/gateway"
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
	written  []gateway.TagWrite
	writeErr error
	delay    time.Duration
}

func (f *fakeTags) ListTags(context.Context, auth.Grant) []gateway.TagInfo {
	return []gateway.TagInfo{{Path: "Line1/Pump/Speed", Device: "plc1", Address: "HR100", Type: value.Float32, WriteLevel: auth.LevelSupervise}}
}

func (f *fakeTags) ReadTags(_ context.Context, g auth.Grant, paths []string) []gateway.TagValue {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]gateway.TagValue, len(paths))
	for i, p := range paths {
		v, ok := f.values[p]
		switch {
		case !g.AllowsPath(p):
			out[i] = gateway.TagValue{Path: p, VQT: value.Bad(value.BadUserAccessDenied, "outside prefixes", testNow)}
		case !ok:
			out[i] = gateway.TagValue{Path: p, VQT: value.Bad(value.BadNodeIDUnknown, "unknown tag", testNow)}
		default:
			out[i] = gateway.TagValue{Path: p, VQT: value.VQT{Value: v, Quality: value.Good, Time: testNow}}
		}
	}
	return out
}

func (f *fakeTags) WriteTags(_ context.Context, g auth.Grant, writes []gateway.TagWrite) ([]gateway.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeErr != nil {
		return nil, f.writeErr
	}
	out := make([]gateway.WriteResult, len(writes))
	for i, w := range writes {
		if !g.AllowsPath(w.Path) {
			out[i] = gateway.WriteResult{Path: w.Path, Quality: value.BadUserAccessDenied, Reason: "outside prefixes"}
			continue
		}
		f.written = append(f.written, w)
		if f.values == nil {
			f.values = map[string]value.Value{}
		}
		f.values[w.Path] = w.Value
		out[i] = gateway.WriteResult{Path: w.Path, Quality: value.Good}
	}
	return out, nil
}

// scriptErr is a script failure as the service layer returns it.
func scriptErr(kind, detail string) error { return &gateway.ScriptError{Kind: kind, Detail: detail} }

type fakeScripts struct {
	gateway.Scripts // the methods no test calls
	err             error
	delay           time.Duration
	gotArgs         json.RawMessage
}

func (f *fakeScripts) SaveScript(_ context.Context, _ auth.Grant, src gateway.ScriptSource) (gateway.ScriptSaved, error) {
	if f.err != nil {
		return gateway.ScriptSaved{}, f.err
	}
	return gateway.ScriptSaved{Module: src.Module, Version: 3, Entries: []gateway.ScriptEntry{{Name: "start", Timeout: 2000 * time.Millisecond}}}, nil
}

func (f *fakeScripts) RollbackScript(_ context.Context, _ auth.Grant, module string) (gateway.ScriptSaved, error) {
	switch {
	case f.err != nil:
		return gateway.ScriptSaved{}, f.err
	case module == "once":
		return gateway.ScriptSaved{}, fmt.Errorf("module once: %w: nothing to roll back to", ErrConflict)
	}
	return gateway.ScriptSaved{Module: module, Version: 2, Entries: []gateway.ScriptEntry{{Name: "start", Timeout: time.Second}}}, nil
}

func (f *fakeScripts) RunScript(ctx context.Context, _ auth.Grant, _, _ string, args json.RawMessage) (gateway.ScriptRun, error) {
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return gateway.ScriptRun{}, ctx.Err()
		}
	}
	if f.err != nil {
		return gateway.ScriptRun{}, f.err
	}
	f.gotArgs = args
	return gateway.ScriptRun{Result: json.RawMessage(`{"ok":true}`), Duration: 12 * time.Millisecond,
		Logs: []gateway.LogLine{{Level: "info", Msg: "hello"}}}, nil
}

func (f *fakeScripts) ListScripts(context.Context, auth.Grant) ([]gateway.ScriptInfo, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []gateway.ScriptInfo{{Module: "pumps", Version: 3}}, nil
}

func (f *fakeScripts) LintScript(context.Context, string) (gateway.LintResult, error) {
	if f.err != nil {
		return gateway.LintResult{}, f.err
	}
	return gateway.LintResult{Linter: "syntax-only"}, nil
}

type fakeKeys struct {
	created []gateway.NewAPIKey
}

func (f *fakeKeys) CreateAPIKey(_ context.Context, _ auth.Grant, req gateway.NewAPIKey) (gateway.APIKeyCreated, error) {
	f.created = append(f.created, req)
	return gateway.APIKeyCreated{ID: "k1", Token: "qk_secret"}, nil
}

func (f *fakeKeys) ListAPIKeys(context.Context) ([]gateway.APIKey, error) {
	return []gateway.APIKey{{ID: "k1", Name: "scada", Scopes: []auth.Scope{auth.TagRead}, WriteLevel: auth.LevelView, Created: testNow}}, nil
}

func (f *fakeKeys) RevokeAPIKey(_ context.Context, _ auth.Grant, id string) (bool, error) {
	switch id {
	case "k1":
		return false, nil
	case "old":
		return true, nil // revoked before
	}
	return false, fmt.Errorf("api key %q: %w", id, ErrNotFound)
}

type fakeHealth struct{ h gateway.HealthReport }

func (f fakeHealth) Health(context.Context) gateway.HealthReport { return f.h }

type fakeDevices struct{}

func (fakeDevices) ListDevices(context.Context) []gateway.DeviceInfo {
	return []gateway.DeviceInfo{{Name: "plc1", Driver: "modbus", State: "connected", Tags: 4}}
}

func (fakeDevices) Device(_ context.Context, name string) (gateway.DeviceInfo, error) {
	if name != "plc1" {
		return gateway.DeviceInfo{}, fmt.Errorf("device %q: %w", name, ErrNotFound)
	}
	return gateway.DeviceInfo{Name: "plc1", Driver: "modbus", State: "connected", Tags: 4, Stats: &gateway.DeviceStats{
		Requests: 10, Errors: map[string]uint64{"timeout": 2}, ErrorsTotal: 2, Timeouts: 2, Reconnects: 1,
		LastGood: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), P50: 1500 * time.Microsecond, P99: 20 * time.Millisecond,
		Units: []gateway.UnitBreaker{{Unit: 2, Breaker: "open", Timeouts: 3, DemotedUntil: time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)}}}}, nil
}

func (fakeDevices) DevicePlan(_ context.Context, name string) ([]gateway.PlannedRequest, error) {
	if name != "plc1" {
		return nil, fmt.Errorf("device %q: %w", name, ErrNotFound)
	}
	return []gateway.PlannedRequest{{Scan: time.Second, FunctionCode: 3, UnitID: 1, Start: 0, Count: 2, Tags: []string{"A"}}}, nil
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
		Health: fakeHealth{gateway.HealthReport{Status: "ok", Version: "1.2.3"}}, Devices: fakeDevices{}}, nil)
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
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
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
