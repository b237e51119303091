package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/api/console"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

func init() {
	// Console users of the fake session store (liveview_test.go).
	sessionUsers["des"] = auth.UserRecord{Name: "des", Realm: auth.RealmPlatform, Permissions: []auth.Permission{auth.Designer}}
	sessionUsers["sba"] = auth.UserRecord{Name: "sba", Realm: auth.RealmPlatform, Permissions: []auth.Permission{auth.SandboxAdmin}}
}

// consoleScripts records the grants of saves and runs and knows versions.
type consoleScripts struct {
	recordingScripts
	saves []auth.Grant
}

func (c *consoleScripts) SaveScript(ctx context.Context, g auth.Grant, src gateway.ScriptSource) (gateway.ScriptSaved, error) {
	c.mu.Lock()
	c.saves = append(c.saves, g)
	c.mu.Unlock()
	return c.fakeScripts.SaveScript(ctx, g, src)
}

func (c *consoleScripts) ScriptVersions(_ context.Context, _ auth.Grant, module string) ([]gateway.ScriptVersion, error) {
	if module != "pumps" {
		return nil, fmt.Errorf("script %q: %w", module, ErrNotFound)
	}
	return []gateway.ScriptVersion{{Version: 1, Saved: testNow}, {Version: 3, Saved: testNow.Add(time.Hour)}}, nil
}

func (c *consoleScripts) ListScripts(context.Context, auth.Grant) ([]gateway.ScriptInfo, error) {
	return []gateway.ScriptInfo{{Module: "pumps", Version: 3, Entries: []gateway.ScriptEntry{{Name: "start", Timeout: 2 * time.Second}},
		LiveView: []string{"start"}}}, nil
}

type fakeCodes struct{}

func (fakeCodes) ScriptCode(_ context.Context, _ auth.Grant, module string, version int64) (gateway.ScriptCode, error) {
	if module != "pumps" || (version != 0 && version != 1 && version != 3) {
		return gateway.ScriptCode{}, fmt.Errorf("script version %s@%d: %w", module, version, ErrNotFound)
	}
	if version == 0 {
		version = 3
	}
	return gateway.ScriptCode{Module: module, Version: version, Saved: testNow, Code: fmt.Sprintf("# v%d\n", version)}, nil
}

type fakeSearch struct {
	mu   sync.Mutex
	got  []gateway.AuditQuery
	recs int
}

func (f *fakeSearch) SearchAudit(_ context.Context, q gateway.AuditQuery) ([]gateway.AuditRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, q)
	var out []gateway.AuditRecord
	for i := range min(f.recs, q.Limit) {
		out = append(out, gateway.AuditRecord{Seq: uint64(100 - i), Time: testNow, Principal: "des", Action: "script.save"})
	}
	return out, nil
}

type fakeRefusals struct {
	mu      sync.Mutex
	targets []string
	reasons []string
}

func (f *fakeRefusals) AuditRefusal(_ context.Context, g auth.Grant, target string, reason error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = append(f.targets, g.Principal+" "+target)
	f.reasons = append(f.reasons, reason.Error())
}

type consoleEnv struct {
	lvEnv
	cscripts *consoleScripts
	search   *fakeSearch
	refusals *fakeRefusals
}

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	e := &consoleEnv{cscripts: &consoleScripts{}, search: &fakeSearch{recs: 3}, refusals: &fakeRefusals{}}
	e.sessions = newFakeSessions()
	e.tags = &recordingTags{fakeTags: fakeTags{values: map[string]value.Value{"Line1/Speed": 12.5}}}
	e.lv = &fakeLiveView{views: []apitypes.View{{Name: "pump1", MinLevel: "view", Widgets: []apitypes.Widget{{Type: "button", Entry: "pumps.start", Label: "Start"}}}}}
	s, err := New(Config{Now: func() time.Time { return testNow }}, Deps{Auth: fakeAuth{}, Tags: e.tags, Scripts: e.cscripts,
		Sessions: e.sessions, LiveView: e.lv, Health: fakeHealth{gateway.HealthReport{Status: "ok"}},
		ScriptCodes: fakeCodes{}, AuditSearch: e.search, Refusals: e.refusals}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = s
	return e
}

// consoleReq is a request of the console: the session's cookie, its CSRF
// token and the console header.
func (e *consoleEnv) consoleReq(t *testing.T, method, path, body string, c *http.Cookie, csrf string) *httptest.ResponseRecorder {
	t.Helper()
	return e.req(t, method, path, body, c, map[string]string{ConsoleHeader: "1", CSRFHeader: csrf, "Content-Type": "application/json"})
}

func TestConsole_Mounted(t *testing.T) {
	e := newConsoleEnv(t)
	rec := e.req(t, "GET", "/console", "", nil, nil)
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != ConsolePath {
		t.Errorf("GET /console: %d %v", rec.Code, rec.Header())
	}
	rec = e.req(t, "GET", "/console/", "", nil, nil)
	want := http.StatusServiceUnavailable
	if console.Built() {
		want = http.StatusOK
	}
	if rec.Code != want || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("GET /console/ (built %v): %d %v", console.Built(), rec.Code, rec.Header())
	}
}

// A console request of a platform session is recorded with origin
// "console"; the same session without the header keeps "liveview".
func TestConsole_Origin(t *testing.T) {
	e := newConsoleEnv(t)
	c, csrf := e.login(t, "des")
	if rec := e.consoleReq(t, "PUT", "/api/v1/scripts/pumps", `{"code":"x = 1\n"}`, c, csrf); rec.Code != 200 {
		t.Fatalf("save from the console: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "PUT", "/api/v1/scripts/pumps", `{"code":"x = 1\n"}`, c, map[string]string{CSRFHeader: csrf}); rec.Code != 200 {
		t.Fatalf("save without the header: %d %s", rec.Code, rec.Body)
	}
	if got := []string{e.cscripts.saves[0].Origin, e.cscripts.saves[1].Origin}; got[0] != ConsoleOrigin || got[1] != "liveview" {
		t.Errorf("origins %v, want [console liveview]", got)
	}
	if g := e.cscripts.saves[0]; g.Principal != "des" || g.Realm != auth.RealmPlatform {
		t.Errorf("grant %+v", g)
	}
	// The header never skips the CSRF check.
	if rec := e.consoleReq(t, "PUT", "/api/v1/scripts/pumps", `{"code":"x = 1\n"}`, c, ""); rec.Code != 403 || problemOf(t, rec).Kind != KindCSRF {
		t.Errorf("console save without the CSRF token: %d %s", rec.Code, rec.Body)
	}
}

// An operator's session is refused every console request naming the realm,
// but may read and end its own session; the header and a panel together are
// a bad request.
func TestConsole_OperatorRefused(t *testing.T) {
	e := newConsoleEnv(t)
	c, csrf := e.login(t, "op")
	rec := e.consoleReq(t, "GET", "/api/v1/tags", "", c, csrf)
	if p := problemOf(t, rec); rec.Code != 403 || p.Kind != KindPermissionDenied || !strings.Contains(p.Detail, "platform-realm") {
		t.Errorf("operator's console request: %d %+v", rec.Code, p)
	}
	if rec := e.consoleReq(t, "GET", "/api/v1/auth/session", "", c, csrf); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"realm":"operator"`) {
		t.Errorf("operator's session info from the console: %d %s", rec.Code, rec.Body)
	}
	if rec := e.consoleReq(t, "POST", "/api/v1/auth/logout", "", c, csrf); rec.Code != http.StatusNoContent {
		t.Errorf("operator's logout from the console: %d %s", rec.Code, rec.Body)
	}
	c, csrf = e.login(t, "des")
	rec = e.req(t, "GET", "/api/v1/tags", "", c, map[string]string{ConsoleHeader: "1", PanelHeader: "pump1"})
	if p := problemOf(t, rec); rec.Code != 400 || !strings.Contains(p.Detail, "not both") {
		t.Errorf("console and panel headers together: %d %+v", rec.Code, p)
	}
}

// A console session runs an entry with its own args only with the designer
// permission; a refusal names it and is audited. Without the console header
// a session still runs only panel buttons.
func TestConsole_RunNeedsDesigner(t *testing.T) {
	e := newConsoleEnv(t)
	c, csrf := e.login(t, "des")
	rec := e.consoleReq(t, "POST", "/api/v1/scripts/pumps/start/run", `{"args":{"line":7}}`, c, csrf)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"result":"started"`) {
		t.Fatalf("designer's run: %d %s", rec.Code, rec.Body)
	}
	if got := e.cscripts.args[0]; got != `{"line":7}` {
		t.Errorf("args %s, want the request's", got)
	}
	if g := e.cscripts.grants[0]; g.Origin != ConsoleOrigin || g.Principal != "des" {
		t.Errorf("run grant %+v", g)
	}
	sc, scsrf := e.login(t, "sba")
	rec = e.consoleReq(t, "POST", "/api/v1/scripts/pumps/start/run", `{"args":1}`, sc, scsrf)
	if p := problemOf(t, rec); rec.Code != 403 || !strings.Contains(p.Detail, "designer") {
		t.Errorf("sandbox_admin's console run: %d %+v", rec.Code, p)
	}
	if len(e.cscripts.args) != 1 {
		t.Errorf("a refused run ran: %v", e.cscripts.args)
	}
	if len(e.refusals.targets) != 1 || !strings.HasPrefix(e.refusals.targets[0], "sba POST /api/v1/scripts/pumps/start/run") {
		t.Errorf("refusals audited: %v", e.refusals.targets)
	}
	rec = e.req(t, "POST", "/api/v1/scripts/pumps/start/run", `{"args":1}`, c, map[string]string{CSRFHeader: csrf})
	if p := problemOf(t, rec); rec.Code != 403 || !strings.Contains(p.Detail, PanelHeader) {
		t.Errorf("a session's run without console or panel: %d %+v", rec.Code, p)
	}
}

func TestConsoleRoutes_ScriptSource(t *testing.T) {
	e := newConsoleEnv(t)
	c, csrf := e.login(t, "des")
	var sc apitypes.ScriptCode
	rec := e.consoleReq(t, "GET", "/api/v1/scripts/pumps", "", c, csrf)
	if err := json.Unmarshal(rec.Body.Bytes(), &sc); rec.Code != 200 || err != nil || sc.Version != 3 || sc.Code != "# v3\n" ||
		len(sc.Entries) != 1 || sc.Entries[0].TimeoutMS != 2000 || len(sc.LiveView) != 1 {
		t.Errorf("GET /scripts/pumps: %d %s", rec.Code, rec.Body)
	}
	var vs []apitypes.ScriptVersionInfo
	rec = e.consoleReq(t, "GET", "/api/v1/scripts/pumps/versions", "", c, csrf)
	if err := json.Unmarshal(rec.Body.Bytes(), &vs); rec.Code != 200 || err != nil || len(vs) != 2 || vs[0].Latest || !vs[1].Latest || vs[1].Version != 3 {
		t.Errorf("versions: %d %s", rec.Code, rec.Body)
	}
	rec = e.consoleReq(t, "GET", "/api/v1/scripts/pumps/versions/1", "", c, csrf)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"code":"# v1\n"`) || strings.Contains(rec.Body.String(), "entries") {
		t.Errorf("version 1: %d %s", rec.Code, rec.Body)
	}
	for path, want := range map[string]int{"/api/v1/scripts/pumps/versions/2": 404, "/api/v1/scripts/pumps/versions/x": 400,
		"/api/v1/scripts/pumps/versions/0": 400, "/api/v1/scripts/nosuch": 404, "/api/v1/scripts/nosuch/versions": 404, "/api/v1/scripts/bad-name": 400} {
		if rec := e.consoleReq(t, "GET", path, "", c, csrf); rec.Code != want {
			t.Errorf("GET %s: %d, want %d (%s)", path, rec.Code, want, rec.Body)
		}
	}
	// The route table's designer: a session without it, a key without it.
	sc2, scsrf := e.login(t, "sba")
	if rec := e.consoleReq(t, "GET", "/api/v1/scripts/pumps", "", sc2, scsrf); rec.Code != 403 || !strings.Contains(rec.Body.String(), "designer") {
		t.Errorf("sandbox_admin reads a script: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "GET", "/api/v1/scripts/pumps/versions/1", "", nil, map[string]string{"Authorization": "Bearer " + tokReader}); rec.Code != 403 {
		t.Errorf("a tag:read key reads a version: %d", rec.Code)
	}
}

func TestConsoleRoutes_AuditSearch(t *testing.T) {
	e := newConsoleEnv(t)
	auth := map[string]string{"Authorization": "Bearer " + tokOperator} // holds users_admin
	rec := e.req(t, "GET", "/api/v1/audit/search?principal=des&origin=console&action=script&result=ok&since=2025-03-01T10:00:00%2B01:00&until=2025-03-01T12:00:00Z&before=99&limit=3", "", nil, auth)
	var page apitypes.AuditPage
	if err := json.Unmarshal(rec.Body.Bytes(), &page); rec.Code != 200 || err != nil || len(page.Records) != 3 || page.NextBefore == nil || *page.NextBefore != 98 {
		t.Fatalf("search: %d %s", rec.Code, rec.Body)
	}
	q := e.search.got[0]
	wantSince := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	if q.Principal != "des" || q.Origin != "console" || q.Action != "script" || q.Result != "ok" || !q.Since.Equal(wantSince) ||
		q.Since.Location() != time.UTC || !q.Until.Equal(testNow) || q.Before != 99 || q.Limit != 3 {
		t.Errorf("query %+v", q)
	}
	rec = e.req(t, "GET", "/api/v1/audit/search", "", nil, auth)
	if err := json.Unmarshal(rec.Body.Bytes(), &page); rec.Code != 200 || err != nil || len(page.Records) != 3 || page.NextBefore != nil || e.search.got[1].Limit != 100 {
		t.Errorf("a last page: %d %s (limit %d)", rec.Code, rec.Body, e.search.got[1].Limit)
	}
	for _, bad := range []string{"since=yesterday", "until=2025-13-01T00:00:00Z", "before=0", "before=x", "limit=0", "limit=1001"} {
		if rec := e.req(t, "GET", "/api/v1/audit/search?"+bad, "", nil, auth); rec.Code != 400 {
			t.Errorf("?%s: %d %s", bad, rec.Code, rec.Body)
		}
	}
	if rec := e.req(t, "GET", "/api/v1/audit/search", "", nil, map[string]string{"Authorization": "Bearer " + tokReader}); rec.Code != 403 || !strings.Contains(rec.Body.String(), "users_admin") {
		t.Errorf("a key without users_admin: %d %s", rec.Code, rec.Body)
	}
}

// The console's own table of what each route needs (console/src/needs.json,
// what its refusals name) is the route table's.
func TestConsole_NeedsMatchRouteTable(t *testing.T) {
	b, err := os.ReadFile("console/src/needs.json")
	if err != nil {
		t.Fatal(err)
	}
	var n struct {
		Routes, Optional, Permissions map[string]string
	}
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	table := map[string]string{}
	for _, rt := range routes {
		table[rt.pattern()] = rt.need.String()
	}
	if len(n.Routes) < 25 {
		t.Fatalf("needs.json lists %d routes", len(n.Routes))
	}
	for pat, need := range n.Routes {
		got, ok := table[pat]
		switch {
		case !ok:
			t.Errorf("needs.json: %s is not in the route table", pat)
		case got != need:
			t.Errorf("needs.json: %s needs %q, the route table says %q", pat, need, got)
		}
	}
	for pat, need := range n.Optional {
		if got, ok := table[pat]; ok && got != need {
			t.Errorf("needs.json (optional): %s needs %q, the route table says %q", pat, need, got)
		}
	}
	for _, p := range auth.AllPermissions {
		if n.Permissions[string(p)] == "" {
			t.Errorf("needs.json has no words for the permission %s", p)
		}
	}
}
