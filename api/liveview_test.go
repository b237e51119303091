package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// ---- fakes of the browser-side dependencies ----

type fakeSessions struct {
	mu       sync.Mutex
	byToken  map[string]auth.SessionInfo
	done     map[string]chan struct{}
	limited  bool
	touches  int
	logouts  []string
	lastAddr string
}

var sessionUsers = map[string]auth.UserRecord{
	"viewer":  {Name: "viewer", Realm: auth.RealmOperator, Level: auth.LevelView},
	"op":      {Name: "op", Realm: auth.RealmOperator, Level: auth.LevelOperate},
	"sup":     {Name: "sup", Realm: auth.RealmOperator, Level: auth.LevelSupervise},
	"admin":   {Name: "admin", Realm: auth.RealmPlatform, Permissions: []auth.Permission{auth.UsersAdmin}},
	"partner": {Name: "partner", Realm: "partner"},
}

func newFakeSessions() *fakeSessions {
	return &fakeSessions{byToken: map[string]auth.SessionInfo{}, done: map[string]chan struct{}{}}
}

func (f *fakeSessions) Login(_ context.Context, user, password, addr string) (string, auth.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAddr = addr
	if f.limited {
		return "", auth.SessionInfo{}, &auth.RateLimitedError{RetryAfter: 2500 * time.Millisecond}
	}
	u, ok := sessionUsers[user]
	if !ok || password != "password1" {
		return "", auth.SessionInfo{}, fmt.Errorf("login: %w", ErrUnauthenticated)
	}
	tok := "qbs_tok_" + user + fmt.Sprint(len(f.byToken))
	done := make(chan struct{})
	info := auth.SessionInfo{ID: "id-" + tok, User: u.Name, Realm: u.Realm, Level: u.Level, Permissions: u.Permissions,
		CSRF: "csrf-" + tok, Created: testNow, LastSeen: testNow, Expires: testNow.Add(12 * time.Hour), Done: done}
	f.byToken[tok] = info
	f.done[tok] = done
	return tok, info, nil
}

func (f *fakeSessions) Session(_ context.Context, token string, touch bool) (auth.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if touch {
		f.touches++
	}
	info, ok := f.byToken[token]
	if !ok {
		return auth.SessionInfo{}, fmt.Errorf("session: %w", ErrUnauthenticated)
	}
	return info, nil
}

func (f *fakeSessions) Logout(_ context.Context, token string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logouts = append(f.logouts, token)
	f.revokeLocked(token)
	return nil
}

func (f *fakeSessions) revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revokeLocked(token)
}

func (f *fakeSessions) revokeLocked(token string) {
	if d, ok := f.done[token]; ok {
		close(d)
		delete(f.done, token)
	}
	delete(f.byToken, token)
}

func (f *fakeSessions) SessionIdleTimeout() time.Duration { return 30 * time.Minute }

type fakeLiveView struct {
	mu       sync.Mutex
	views    []apitypes.View
	hatch    bool
	audits   []panelAudit
	auditErr error
}

// panelAudit is one record the panel fake was given: who, and what.
type panelAudit struct {
	Grant auth.Grant
	gateway.AuditEvent
}

func (f *fakeLiveView) Views(context.Context) []apitypes.View { return f.views }
func (f *fakeLiveView) Exposed(module, entry string) bool {
	return module == "pumps" && (entry == "start" || entry == "chain")
}
func (f *fakeLiveView) EscapeHatch() bool { return f.hatch }
func (f *fakeLiveView) CanAudit() error   { return f.auditErr }
func (f *fakeLiveView) Audit(_ context.Context, g auth.Grant, ev gateway.AuditEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audits = append(f.audits, panelAudit{Grant: g, AuditEvent: ev})
	return nil
}
func (f *fakeLiveView) PanelEvents(_ context.Context, panel string, limit int) ([]gateway.AuditRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gateway.AuditRecord
	for _, a := range f.audits {
		if a.Grant.Origin == "liveview:"+panel && len(out) < limit {
			out = append(out, gateway.AuditRecord{Principal: a.Grant.Principal, Action: a.Action, Target: a.Target, Result: a.Result})
		}
	}
	return out, nil
}

type fakeLive struct {
	mu   sync.Mutex
	subs []chan gateway.TagValue
}

func (f *fakeLive) SubscribeValues(_ auth.Grant, buf int) (<-chan gateway.TagValue, func() uint64, func()) {
	ch := make(chan gateway.TagValue, buf)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, func() uint64 { return 0 }, func() {}
}

func (f *fakeLive) publish(tv gateway.TagValue) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		ch <- tv
	}
	return len(f.subs)
}

type fakeUsers struct {
	added []gateway.NewUser
}

func (f *fakeUsers) ListUsers(context.Context) ([]gateway.User, error) {
	return []gateway.User{{Name: "op", Realm: auth.RealmOperator, Level: auth.LevelOperate, Created: testNow, Changed: testNow}}, nil
}
func (f *fakeUsers) AddUser(_ context.Context, g auth.Grant, req gateway.NewUser) error {
	if req.Name == "op" {
		return fmt.Errorf("user %q: %w", req.Name, ErrConflict)
	}
	// The service's rule (its own tests hold it); the API answers its
	// refusal as a 403.
	if err := g.CoversUser(req.Name, req.Realm, req.Level, req.Permissions); err != nil {
		return err
	}
	f.added = append(f.added, req)
	return nil
}
func (f *fakeUsers) SetPassword(_ context.Context, _ auth.Grant, name, _ string) error {
	if name != "op" {
		return fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	return nil
}
func (f *fakeUsers) DisableUser(_ context.Context, _ auth.Grant, name string) (bool, error) {
	return name == "gone", nil // "gone" was disabled before
}

// recordingTags records the grant of each call.
type recordingTags struct {
	fakeTags
	mu     sync.Mutex
	grants []auth.Grant
}

func (r *recordingTags) ListTags(_ context.Context, g auth.Grant) []gateway.TagInfo {
	return []gateway.TagInfo{
		{Path: "Line1/Speed", Type: value.Float64, WriteLevel: auth.LevelOperate, Units: "rpm"},
		{Path: "Line1/Setpoint", Type: value.Float64, WriteLevel: auth.LevelOperate},
		{Path: "Line1/Limit", Type: value.Float64, WriteLevel: auth.LevelSupervise},
		{Path: "Line1/Counter", Type: value.Int32, WriteLevel: auth.LevelOperate, ReadOnly: true},
	}
}

func (r *recordingTags) WriteTags(ctx context.Context, g auth.Grant, ws []gateway.TagWrite) ([]gateway.WriteResult, error) {
	r.mu.Lock()
	r.grants = append(r.grants, g)
	r.mu.Unlock()
	out := make([]gateway.WriteResult, len(ws))
	for i, w := range ws {
		out[i] = gateway.WriteResult{Path: w.Path, Quality: value.Good}
		if w.Path == "Line1/Limit" && !g.AllowsLevel(auth.LevelSupervise) {
			out[i] = gateway.WriteResult{Path: w.Path, Quality: value.BadUserAccessDenied, Reason: `write level "supervise" required`}
		}
	}
	return out, nil
}

type recordingScripts struct {
	fakeScripts
	mu     sync.Mutex
	grants []auth.Grant
	args   []string
}

func (r *recordingScripts) RunScript(_ context.Context, g auth.Grant, module, entry string, args json.RawMessage) (gateway.ScriptRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grants = append(r.grants, g)
	r.args = append(r.args, string(args))
	if entry == "chain" && !g.HasScope(auth.ScriptExecute) {
		return gateway.ScriptRun{}, scriptErr("permission_denied", `missing scope "script:execute" for system.script.runOnGateway`)
	}
	return gateway.ScriptRun{Result: json.RawMessage(`"started"`)}, nil
}

type lvEnv struct {
	srv      *Server
	sessions *fakeSessions
	lv       *fakeLiveView
	live     *fakeLive
	tags     *recordingTags
	scripts  *recordingScripts
	users    *fakeUsers
}

func f64(v float64) *float64 { return &v }

func newLVEnv(t *testing.T, cfg Config) *lvEnv {
	t.Helper()
	e := &lvEnv{sessions: newFakeSessions(), live: &fakeLive{}, users: &fakeUsers{},
		tags: &recordingTags{fakeTags: fakeTags{values: map[string]value.Value{"Line1/Speed": 12.5}}}, scripts: &recordingScripts{},
		lv: &fakeLiveView{views: []apitypes.View{
			{Name: "pump1", Title: "Pump 1", MinLevel: "view", Events: 5, Widgets: []apitypes.Widget{
				{Type: "value", Tag: "Line1/Speed", Label: "Speed"},
				{Type: "numeric", Tag: "Line1/Setpoint", Label: "Setpoint", Min: f64(0), Max: f64(100)},
				{Type: "numeric", Tag: "Line1/Limit", Label: "Limit"},
				{Type: "numeric", Tag: "Line1/Counter", Label: "Counter"},
				{Type: "button", Entry: "pumps.start", Label: "Start", Args: json.RawMessage(`{"line":1}`), Confirm: "Start?"},
				{Type: "button", Entry: "pumps.chain", Label: "Chain"},
			}},
			{Name: "expert", Title: "Expert", MinLevel: "supervise", Events: 5, Widgets: []apitypes.Widget{
				{Type: "value", Tag: "Line1/Speed", Label: "Speed", Buttons: []apitypes.Button{
					{Entry: "pumps.start", Label: "Start", Args: json.RawMessage(`{"line":2}`)}}},
				{Type: "buttons", Label: "Tools", Buttons: []apitypes.Button{
					{Entry: "pumps.chain", Label: "Chain", Args: json.RawMessage(`{"x":3}`)}}}}},
		}}}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	s, err := New(cfg, Deps{Auth: fakeAuth{}, Tags: e.tags, Scripts: e.scripts, Sessions: e.sessions, Users: e.users,
		LiveView: e.lv, Live: e.live, Health: fakeHealth{gateway.HealthReport{Status: "ok"}},
		TLS: &apitypes.TLSInfo{Mode: "auto", FingerprintSHA256: "AA:BB"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = s
	return e
}

// login logs user in and returns the session cookie and the CSRF token.
func (e *lvEnv) login(t *testing.T, user string) (*http.Cookie, string) {
	t.Helper()
	rec := e.req(t, "POST", "/api/v1/auth/login", `{"user":"`+user+`","password":"password1"}`, nil, nil)
	if rec.Code != 200 {
		t.Fatalf("login %s: %d %s", user, rec.Code, rec.Body)
	}
	var si apitypes.SessionInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &si); err != nil {
		t.Fatal(err)
	}
	cs := rec.Result().Cookies()
	if len(cs) != 1 {
		t.Fatalf("login set %d cookies", len(cs))
	}
	return cs[0], si.CSRFToken
}

func (e *lvEnv) req(t *testing.T, method, path, body string, c *http.Cookie, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if body != "" {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	if c != nil {
		req.AddCookie(c)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// ---- tests ----

func TestLogin_SetsStrictHttpOnlyCookie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool
		cookie string
	}{{"plain http", false, SessionCookie}, {"tls", true, SecureSessionCookie}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if tc.tls {
				cfg.TLS = &tls.Config{}
			}
			e := newLVEnv(t, cfg)
			c, csrf := e.login(t, "op")
			if c.Name != tc.cookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tc.tls || c.Path != "/" {
				t.Errorf("cookie %+v", c)
			}
			if csrf == "" || strings.Contains(c.Value, csrf) {
				t.Errorf("csrf token %q", csrf)
			}
		})
	}
}

func TestLogin_WrongPasswordAndRateLimit(t *testing.T) {
	e := newLVEnv(t, Config{})
	rec := e.req(t, "POST", "/api/v1/auth/login", `{"user":"op","password":"nope"}`, nil, nil)
	if p := problemOf(t, rec); rec.Code != 401 || rec.Header().Get("Set-Cookie") != "" || p.Detail != "wrong user name or password" {
		t.Fatalf("wrong password: %d %+v", rec.Code, p)
	}
	e.sessions.limited = true
	rec = e.req(t, "POST", "/api/v1/auth/login", `{"user":"op","password":"password1"}`, nil, nil)
	// 2.5 s: the header and the text both say 3 (rounded up).
	if p := problemOf(t, rec); rec.Code != 429 || p.Kind != KindRateLimited || rec.Header().Get("Retry-After") != "3" || !strings.HasSuffix(p.Detail, "retry in 3s") {
		t.Fatalf("rate limited: %d %+v Retry-After=%q", rec.Code, p, rec.Header().Get("Retry-After"))
	}
	if e.sessions.lastAddr != "192.0.2.1" {
		t.Errorf("rate-limit address %q, want the client IP", e.sessions.lastAddr)
	}
	rec = e.req(t, "POST", "/api/v1/auth/login", `{"user":"op","password":"password1"}`, nil, map[string]string{"Origin": "http://evil.example"})
	if p := problemOf(t, rec); rec.Code != 403 || p.Kind != KindCSRF {
		t.Fatalf("cross-origin login: %d %+v", rec.Code, p)
	}
}

func TestSession_CSRF_CrossSiteFormPostRefused(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "op")
	cases := []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"cross-site form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example",
			"Sec-Fetch-Site": "cross-site"}, `writes=x`},
		{"cross-site with the token", map[string]string{"Origin": "http://evil.example", CSRFHeader: csrf}, `{"writes":[{"path":"Line1/Setpoint","value":1}]}`},
		{"same-origin without the token", map[string]string{"Origin": "http://example.com"}, `{"writes":[{"path":"Line1/Setpoint","value":1}]}`},
		{"wrong token", map[string]string{CSRFHeader: "csrf-guess"}, `{"writes":[{"path":"Line1/Setpoint","value":1}]}`},
		{"same-site subdomain", map[string]string{CSRFHeader: csrf, "Sec-Fetch-Site": "same-site"}, `{"writes":[{"path":"Line1/Setpoint","value":1}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.req(t, "POST", "/api/v1/tags/write", tc.body, c, tc.hdr)
			if p := problemOf(t, rec); rec.Code != 403 || p.Kind != KindCSRF {
				t.Fatalf("%d %+v, want 403 csrf", rec.Code, p)
			}
		})
	}
	if len(e.tags.grants) != 0 {
		t.Fatalf("a refused request reached the tag engine: %d calls", len(e.tags.grants))
	}
	rec := e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Setpoint","value":1}]}`, c,
		map[string]string{CSRFHeader: csrf, "Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"})
	if rec.Code != 200 {
		t.Fatalf("same-origin with the token: %d %s", rec.Code, rec.Body)
	}
	// Reads need no token; bearer calls are unaffected by CSRF rules.
	if rec := e.req(t, "GET", "/api/v1/tags", "", c, nil); rec.Code != 200 {
		t.Fatalf("GET with the cookie: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Setpoint","value":1}]}`, nil,
		map[string]string{"Authorization": "Bearer " + tokFull, "Origin": "http://elsewhere.example"}); rec.Code != 200 {
		t.Fatalf("bearer write: %d %s", rec.Code, rec.Body)
	}
}

func TestSession_ForgedRealmLevelScopeChangeNothing(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "op")
	forged := map[string]string{CSRFHeader: csrf, "X-Qubiq-Realm": "platform", "X-Qubiq-Level": "design",
		"X-Qubiq-Scopes": "script:execute", "X-Qubiq-Principal": "admin", "X-Forwarded-User": "admin"}
	rec := e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Limit","value":5}]}`, c, forged)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Bad_UserAccessDenied") {
		t.Fatalf("forged headers: %d %s", rec.Code, rec.Body)
	}
	want := auth.LiveViewSessionGrant(auth.Session{User: "op", Realm: auth.RealmOperator, Level: auth.LevelOperate})
	want.Expires = testNow.Add(12 * time.Hour)
	got := e.tags.grants[0]
	if got.Principal != want.Principal || got.Realm != want.Realm || got.WriteLevel != want.WriteLevel ||
		!slices.Equal(got.Scopes, want.Scopes) || len(got.Permissions) != 0 || got.Origin != "liveview" {
		t.Fatalf("grant %+v, want the session's %+v", got, want)
	}
	// Forged fields in a body are refused, never read.
	for _, body := range []string{`{"writes":[{"path":"Line1/Limit","value":5}],"realm":"platform"}`,
		`{"writes":[{"path":"Line1/Limit","value":5,"write_level":"design"}]}`,
		`{"writes":[{"path":"Line1/Limit","value":5}],"scopes":["script:execute"]}`} {
		rec := e.req(t, "POST", "/api/v1/tags/write", body, c, map[string]string{CSRFHeader: csrf})
		if p := problemOf(t, rec); rec.Code != 400 {
			t.Errorf("body %s: %d %+v, want 400", body, rec.Code, p)
		}
	}
	// A forged panel the session may not open is refused, not trusted.
	rec = e.req(t, "POST", "/api/v1/scripts/pumps/start/run", "", c, map[string]string{CSRFHeader: csrf, PanelHeader: "expert"})
	if p := problemOf(t, rec); rec.Code != 403 || !strings.Contains(p.Detail, `"supervise"`) {
		t.Fatalf("forged panel: %d %+v", rec.Code, p)
	}
	// A bearer token and a cookie: the bearer decides, the cookie is ignored.
	rec = e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Limit","value":5}]}`, c,
		map[string]string{"Authorization": "Bearer " + tokReader})
	if rec.Code != 403 {
		t.Fatalf("reader bearer with an operator cookie: %d %s", rec.Code, rec.Body)
	}
}

func TestSession_ViewLevelOperatorCannotWrite(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "viewer")
	rec := e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Setpoint","value":1}]}`, c, map[string]string{CSRFHeader: csrf})
	if p := problemOf(t, rec); rec.Code != 403 || !strings.Contains(p.Detail, `missing scope "tag:write"`) {
		t.Fatalf("%d %+v", rec.Code, p)
	}
	// An unknown realm gets reads only, too.
	c, csrf = e.login(t, "partner")
	rec = e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Setpoint","value":1}]}`, c, map[string]string{CSRFHeader: csrf})
	if rec.Code != 403 {
		t.Fatalf("unknown realm: %d %s", rec.Code, rec.Body)
	}
}

func TestListViews_ReadOnlyControlsNameTheReason(t *testing.T) {
	e := newLVEnv(t, Config{})
	check := func(user string, wantViews int, want map[string]string) {
		t.Helper()
		c, _ := e.login(t, user)
		rec := e.req(t, "GET", "/api/v1/liveview/views", "", c, nil)
		var vs []apitypes.View
		if err := json.Unmarshal(rec.Body.Bytes(), &vs); err != nil || rec.Code != 200 {
			t.Fatalf("%s: %d %s", user, rec.Code, rec.Body)
		}
		if len(vs) != wantViews {
			t.Fatalf("%s sees %d views, want %d", user, len(vs), wantViews)
		}
		for _, w := range vs[0].Widgets {
			if r, ok := want[w.Tag]; ok {
				if (r == "") != w.Writable || !strings.Contains(w.ReadOnlyReason, r) {
					t.Errorf("%s %s: writable=%v reason=%q, want %q", user, w.Tag, w.Writable, w.ReadOnlyReason, r)
				}
			}
		}
	}
	check("op", 1, map[string]string{"Line1/Setpoint": "", "Line1/Limit": `write level "supervise" required (you have "operate")`,
		"Line1/Counter": "tag is read-only"})
	check("viewer", 1, map[string]string{"Line1/Setpoint": `write level "operate" required (you have "view")`})
	check("sup", 2, map[string]string{"Line1/Setpoint": "", "Line1/Limit": ""})
}

func TestRunFromPanel_GrantDerivedAndAudited(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "op")
	h := map[string]string{CSRFHeader: csrf, PanelHeader: "pump1"}
	rec := e.req(t, "POST", "/api/v1/scripts/pumps/start/run", "", c, h)
	if rec.Code != 200 {
		t.Fatalf("press: %d %s", rec.Code, rec.Body)
	}
	g := e.scripts.grants[0]
	if g.HasScope(auth.ScriptExecute) || !g.HasScope(auth.TagWrite) || g.WriteLevel != auth.LevelOperate || g.Origin != "liveview:pump1" {
		t.Fatalf("grant %+v", g)
	}
	if e.scripts.args[0] != `{"line":1}` {
		t.Errorf("args %s, want the button's", e.scripts.args[0])
	}
	rec = e.req(t, "POST", "/api/v1/scripts/pumps/chain/run", "", c, h)
	if p := problemOf(t, rec); rec.Code != 403 || !strings.Contains(p.Detail, "script:execute") {
		t.Fatalf("nested runOnGateway at operate: %d %+v", rec.Code, p)
	}
	a := e.lv.audits
	if len(a) != 2 || a[0].Action != "liveview.press" || a[0].Target != "pumps.start" || a[0].Result != "ok" ||
		a[0].Grant.Principal != "op" || a[0].Grant.Origin != "liveview:pump1" || a[1].Result != "permission_denied" ||
		!strings.Contains(a[1].Detail, "script:execute") {
		t.Fatalf("audits %+v", a)
	}
	after, _ := json.Marshal(a[0].After)
	if !strings.Contains(string(after), `"write_level":"operate"`) || !strings.Contains(string(after), `"escape_hatch":false`) {
		t.Errorf("audit detail %s lacks the grant", after)
	}
	// The panel lists its own events.
	rec = e.req(t, "GET", "/api/v1/liveview/views/pump1/events", "", c, nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"target":"pumps.chain"`) {
		t.Fatalf("events: %d %s", rec.Code, rec.Body)
	}

	c2, csrf2 := e.login(t, "sup")
	rec = e.req(t, "POST", "/api/v1/scripts/pumps/chain/run", "", c2, map[string]string{CSRFHeader: csrf2, PanelHeader: "pump1"})
	if rec.Code != 200 || !e.scripts.grants[2].HasScope(auth.ScriptExecute) {
		t.Fatalf("supervise press: %d %s", rec.Code, rec.Body)
	}
}

// TestRunFromPanel_ButtonsInBarsAndCards: a button of a bar or inside a
// card runs with its own args, as a button widget does.
func TestRunFromPanel_ButtonsInBarsAndCards(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "sup")
	h := map[string]string{CSRFHeader: csrf, PanelHeader: "expert"}
	for _, p := range []string{"/api/v1/scripts/pumps/start/run", "/api/v1/scripts/pumps/chain/run"} {
		if rec := e.req(t, "POST", p, "", c, h); rec.Code != 200 {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	if len(e.scripts.args) != 2 || e.scripts.args[0] != `{"line":2}` || e.scripts.args[1] != `{"x":3}` {
		t.Fatalf("args %v, want the card's button's and the bar's", e.scripts.args)
	}
	if a := e.lv.audits; len(a) != 2 || a[0].Target != "pumps.start" || a[1].Target != "pumps.chain" || a[1].Result != "ok" {
		t.Fatalf("audits %+v", a)
	}
}

func TestRunFromPanel_Refusals(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "op")
	cases := []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		detail           string
	}{
		{"no panel", "/api/v1/scripts/pumps/start/run", "", map[string]string{CSRFHeader: csrf}, 403, "from a panel"},
		{"entry not on the panel", "/api/v1/scripts/pumps/stop/run", "", map[string]string{CSRFHeader: csrf, PanelHeader: "pump1"}, 403, "not exposed"},
		{"unknown panel", "/api/v1/scripts/pumps/start/run", "", map[string]string{CSRFHeader: csrf, PanelHeader: "ghost"}, 404, "ghost"},
		{"args from the request", "/api/v1/scripts/pumps/start/run", `{"args":{"rpm":9999}}`, map[string]string{CSRFHeader: csrf, PanelHeader: "pump1"}, 400, "come from the view"},
		{"no csrf", "/api/v1/scripts/pumps/start/run", "", map[string]string{PanelHeader: "pump1"}, 403, CSRFHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.req(t, "POST", tc.path, tc.body, c, tc.hdr)
			if p := problemOf(t, rec); rec.Code != tc.status || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("%d %+v, want %d naming %q", rec.Code, p, tc.status, tc.detail)
			}
		})
	}
	if len(e.scripts.grants) != 0 {
		t.Fatalf("a refused press ran a script")
	}
	e.lv.auditErr = errors.New("queue full")
	rec := e.req(t, "POST", "/api/v1/scripts/pumps/start/run", "", c, map[string]string{CSRFHeader: csrf, PanelHeader: "pump1"})
	if rec.Code != 503 || len(e.scripts.grants) != 0 {
		t.Fatalf("press without audit: %d, ran %d", rec.Code, len(e.scripts.grants))
	}
}

func TestRunFromPanel_EscapeHatchWidensAndIsAudited(t *testing.T) {
	e := newLVEnv(t, Config{})
	e.lv.hatch = true
	c, csrf := e.login(t, "op")
	rec := e.req(t, "POST", "/api/v1/scripts/pumps/chain/run", "", c, map[string]string{CSRFHeader: csrf, PanelHeader: "pump1"})
	if rec.Code != 200 || !e.scripts.grants[0].HasScope(auth.ScriptExecute) {
		t.Fatalf("escape hatch press: %d %s", rec.Code, rec.Body)
	}
	after, _ := json.Marshal(e.lv.audits[0].After)
	if !strings.Contains(string(after), `"escape_hatch":true`) {
		t.Fatalf("audit %s does not say the hatch widened the grant", after)
	}
	// Panel writes keep the operator's level under the hatch.
	rec = e.req(t, "POST", "/api/v1/tags/write", `{"writes":[{"path":"Line1/Limit","value":5}]}`, c, map[string]string{CSRFHeader: csrf})
	if !strings.Contains(rec.Body.String(), "Bad_UserAccessDenied") {
		t.Fatalf("hatch widened a direct write: %s", rec.Body)
	}
	rec = e.req(t, "GET", "/api/v1/health", "", nil, nil)
	if !strings.Contains(rec.Body.String(), `"escape_hatch":true`) || !strings.Contains(rec.Body.String(), `"fingerprint_sha256":"AA:BB"`) {
		t.Fatalf("health %s", rec.Body)
	}
	rec = e.req(t, "GET", "/api/v1/auth/session", "", c, nil)
	if !strings.Contains(rec.Body.String(), `"escape_hatch":true`) {
		t.Fatalf("session %s", rec.Body)
	}
}

func TestLogout_EndsSession(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, csrf := e.login(t, "op")
	if rec := e.req(t, "POST", "/api/v1/auth/logout", "", c, nil); rec.Code != 403 {
		t.Fatalf("logout without csrf: %d", rec.Code)
	}
	rec := e.req(t, "POST", "/api/v1/auth/logout", "", c, map[string]string{CSRFHeader: csrf})
	if rec.Code != 204 || !strings.Contains(rec.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %q", rec.Code, rec.Header().Get("Set-Cookie"))
	}
	if rec := e.req(t, "GET", "/api/v1/tags", "", c, nil); rec.Code != 401 {
		t.Fatalf("after logout: %d", rec.Code)
	}
	if rec := e.req(t, "POST", "/api/v1/auth/logout", "", nil, map[string]string{"Authorization": "Bearer " + tokFull}); rec.Code != 401 {
		t.Fatalf("logout with a bearer: %d", rec.Code)
	}
}

func TestUsers_Routes(t *testing.T) {
	e := newLVEnv(t, Config{})
	bearer := map[string]string{"Authorization": "Bearer " + tokFull}
	if rec := e.req(t, "GET", "/api/v1/users", "", nil, bearer); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"name":"op"`) ||
		strings.Contains(rec.Body.String(), "hash") {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/api/v1/users", `{"name":"op2","realm":"operator","level":"operate","password":"password1"}`, nil, bearer); rec.Code != 201 {
		t.Fatalf("add: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/api/v1/users", `{"name":"op","realm":"operator","level":"operate","password":"password1"}`, nil, bearer); rec.Code != 409 {
		t.Fatalf("add existing: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "PUT", "/api/v1/users/ghost/password", `{"password":"password2"}`, nil, bearer); rec.Code != 404 {
		t.Fatalf("passwd unknown: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/api/v1/users/op/disable", "", nil, bearer); rec.Code != 204 || rec.Body.Len() != 0 {
		t.Fatalf("disable: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/api/v1/users/gone/disable", "", nil, bearer); rec.Code != 200 ||
		strings.TrimSpace(rec.Body.String()) != `{"already":true,"detail":"user \"gone\" was already disabled; nothing changed"}` {
		t.Fatalf("disable a disabled user: %d %s", rec.Code, rec.Body)
	}
	// A users_admin without designer cannot make a designer.
	c, csrf := e.login(t, "admin")
	rec := e.req(t, "POST", "/api/v1/users", `{"name":"eng","realm":"platform","permissions":["designer"],"password":"password1"}`, c,
		map[string]string{CSRFHeader: csrf})
	if p := problemOf(t, rec); rec.Code != 403 || !strings.Contains(p.Detail, `"designer"`) {
		t.Fatalf("widening add: %d %+v", rec.Code, p)
	}
	// An operator session is refused the users routes.
	c, _ = e.login(t, "sup")
	if rec := e.req(t, "GET", "/api/v1/users", "", c, nil); rec.Code != 403 {
		t.Fatalf("operator lists users: %d", rec.Code)
	}
}

func TestLiveViewAssets_ServedWithCSP(t *testing.T) {
	e := newLVEnv(t, Config{})
	if rec := e.req(t, "GET", "/", "", nil, nil); rec.Code != 302 || rec.Header().Get("Location") != "/liveview/" {
		t.Fatalf("GET /: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	for path, want := range map[string]string{"/liveview/": "<title>QUBIQ LiveView</title>", "/liveview/net.js": "X-CSRF-Token",
		"/liveview/app.css": "q-stale"} {
		rec := e.req(t, "GET", path, "", nil, nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) ||
			!strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: %d, CSP %q", path, rec.Code, rec.Header().Get("Content-Security-Policy"))
		}
	}
	if rec := e.req(t, "GET", "/liveview/nope.js", "", nil, nil); rec.Code != 404 {
		t.Errorf("missing asset: %d", rec.Code)
	}
}

func TestWS_LiveValuesAndRevocationClosesSocket(t *testing.T) {
	old := wsHeartbeat
	wsHeartbeat = 50 * time.Millisecond
	t.Cleanup(func() { wsHeartbeat = old })
	e := newLVEnv(t, Config{})
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	c, _ := e.login(t, "op")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A cross-site page cannot open the socket with the operator's cookie.
	_, resp, err := websocket.Dial(ctx, strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {c.String()}, "Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("cross-origin handshake: %v %v", err, resp)
	}

	ws, _, err := websocket.Dial(ctx, strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {c.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := wsjson.Write(ctx, ws, apitypes.WSMessage{Type: "subscribe", Paths: []string{"Line1/Speed"}}); err != nil {
		t.Fatal(err)
	}
	next := func(typ string) apitypes.WSMessage {
		t.Helper()
		for {
			var m apitypes.WSMessage
			if err := wsjson.Read(ctx, ws, &m); err != nil {
				t.Fatalf("read %s: %v", typ, err)
			}
			if m.Type == typ {
				return m
			}
		}
	}
	if m := next("values"); len(m.Values) != 1 || m.Values[0].Value != 12.5 {
		t.Fatalf("snapshot %+v", m)
	}
	next("heartbeat")
	for e.live.publish(gateway.TagValue{Path: "Other/Tag", VQT: value.VQT{Quality: value.Good, Value: 1.0}}) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	e.live.publish(gateway.TagValue{Path: "Line1/Speed", VQT: value.VQT{Quality: value.Good, Value: 13.0}})
	if m := next("values"); len(m.Values) != 1 || m.Values[0].Path != "Line1/Speed" || fmt.Sprint(m.Values[0].Value) != "13" {
		t.Fatalf("change %+v (the unsubscribed tag must not show)", m)
	}
	e.sessions.revoke(c.Value)
	if m := next("error"); !strings.Contains(m.Reason, "session ended") {
		t.Fatalf("error message %+v", m)
	}
	var m apitypes.WSMessage
	err = wsjson.Read(ctx, ws, &m)
	if websocket.CloseStatus(err) != wsCloseSessionEnded {
		t.Fatalf("close status %v (%v), want 4001", websocket.CloseStatus(err), err)
	}
}

func TestSession_BackgroundRequestsDoNotTouch(t *testing.T) {
	e := newLVEnv(t, Config{})
	c, _ := e.login(t, "op")
	n := e.sessions.touches
	if rec := e.req(t, "GET", "/api/v1/liveview/views/pump1/events", "", c, map[string]string{BackgroundHeader: "1"}); rec.Code != 200 {
		t.Fatalf("background poll: %d %s", rec.Code, rec.Body)
	}
	if e.sessions.touches != n {
		t.Fatal("a background request restarted the idle timeout")
	}
	e.req(t, "GET", "/api/v1/tags", "", c, nil)
	if e.sessions.touches != n+1 {
		t.Fatal("an operator's request did not restart the idle timeout")
	}
}
