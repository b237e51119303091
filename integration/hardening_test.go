//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// hardeningProject: tags inside and outside a key's prefixes, a module
// whose entries succeed, raise, probe tags, and loop on system.* calls
// (the last one on a panel's button).
const hardeningProject = `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Setpoint, device: sim, address: memory, type: float64}
  - {path: Line2/Secret, device: sim, address: memory, type: float64}
scripts:
  - {module: m, file: scripts/m.py, liveview: [loop]}
views:
  - name: pump1
    widgets:
      - {type: value, tag: Line1/Setpoint}
      - {type: button, label: Loop, entry: m.loop}
`

const hardeningPy = `def ok(args):
    return 1


def boom(args):
    raise ValueError("boom")


def probe(args):
    vals = system.tag.read(["Line2/Secret", "Line2/Nope"])
    return [[v.quality, v.reason] for v in vals]


@gateway(timeout_ms=30000)
def loop(args):
    system.vars.set("loop_started", 1)
    while True:
        system.tag.read(["Line1/Setpoint"])
`

func startHardeningDaemon(t *testing.T) *daemon {
	t.Helper()
	d := newDaemon(t, hardeningProject)
	if err := os.MkdirAll(filepath.Join(d.dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "scripts", "m.py"), []byte(hardeningPy), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start()
	if d.token == "" {
		t.Fatal("no bootstrap token written at first start")
	}
	return d
}

// raw sends body with contentType and the bootstrap token.
func (d *daemon) raw(method, path, contentType, body string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

type auditRec struct {
	Seq    uint64          `json:"seq"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Result string          `json:"result"`
	Detail string          `json:"detail"`
	After  json.RawMessage `json:"after"`
}

// audit lists the audit log with query q ("result=script_error").
func (d *daemon) audit(q string) ([]auditRec, []byte) {
	d.t.Helper()
	var recs []auditRec
	st, raw := d.call("GET", "/api/v1/audit?limit=10000&"+q, d.token, nil, &recs)
	if st != 200 {
		d.t.Fatalf("GET /audit?%s: %d %s", q, st, raw)
	}
	return recs, raw
}

// TestHardening_StrictInputAndAudit through the real qubiqd: JSON bodies
// with invalid UTF-8, duplicate keys, a wrongly cased field or the wrong
// Content-Type are refused naming the problem and store nothing; the audit
// stays valid JSON; a failed run is audited with its kind and the audit
// filters by result over REST and qubiqctl; refused tokens are audited per
// source and reason with a count; the OpenAPI document is served.
func TestHardening_StrictInputAndAudit(t *testing.T) {
	d := startHardeningDaemon(t)

	for _, tt := range []struct {
		name, ct, body string
		status         int
		want           string
	}{
		{"invalid UTF-8", "application/json", "{\"value\": \"a\xffb\"}", 400, `field \"value\": invalid UTF-8`},
		{"lone surrogate", "application/json", `{"value": "\udc00"}`, 400, `lone UTF-16 surrogate`},
		{"duplicate key", "application/json", `{"value": 1, "value": 2}`, 400, `duplicate key \"value\"`},
		{"wrongly cased field name", "application/json", `{"Value": 1}`, 400, `unknown field \"Value\"`},
		{"curl -d", "application/x-www-form-urlencoded", `{"value": 1}`, 415, `application/json`},
		{"no content type", "", `{"value": 1}`, 415, `application/json`},
	} {
		st, body := d.raw("PUT", "/api/v1/vars/k", tt.ct, tt.body)
		if st != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %s, want %d naming %s", tt.name, st, body, tt.status, tt.want)
		}
	}
	if st, body := d.raw("GET", "/api/v1/vars/k", "", ""); st != 404 {
		t.Fatalf("a refused body stored a var: %d %s", st, body)
	}
	if st, body := d.raw("PUT", "/api/v1/vars/k", "application/json; charset=utf-8", `{"value": "Kühlung"}`); st != 200 {
		t.Fatalf("a strict body refused: %d %s", st, body)
	}

	// A failed run's record says so; the audit filters by result.
	if st, body := d.raw("POST", "/api/v1/scripts/m/boom/run", "", ""); st != 422 || !strings.Contains(body, `"kind":"script_error"`) {
		t.Fatalf("run of m.boom: %d %s", st, body)
	}
	if st, body := d.raw("POST", "/api/v1/scripts/m/ok/run", "", ""); st != 200 {
		t.Fatalf("run of m.ok: %d %s", st, body)
	}
	failed, _ := d.audit("result=script_error")
	if len(failed) != 1 || failed[0].Action != "script.run" || failed[0].Target != "m.boom" || !strings.Contains(failed[0].Detail, "ValueError") {
		t.Fatalf("records with result script_error: %+v, want the one run of m.boom", failed)
	}
	ok, _ := d.audit("result=ok&action=script.run")
	if len(ok) != 1 || ok[0].Target != "m.ok" {
		t.Fatalf("script.run records with result ok: %+v, want the one of m.ok", ok)
	}
	out := d.qubiqctl(d.token, "audit", "--result", "script_error")
	if !strings.Contains(out, "m.boom") || strings.Contains(out, "m.ok") {
		t.Fatalf("qubiqctl audit --result script_error:\n%s", out)
	}

	// Refused tokens: 25 with an unknown token and one without any, from
	// this address, make a handful of records whose counts add up.
	for range 25 {
		req, _ := http.NewRequest("GET", d.url+"/api/v1/tags", nil)
		req.Header.Set("Authorization", "Bearer qbq_0123456789abcdef_nope")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("unknown token: %d", resp.StatusCode)
		}
	}
	if resp, err := http.Get(d.url + "/api/v1/tags"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}
	counts := map[string]int{}
	waitFor(t, 30*time.Second, "refused tokens audited with their counts", func() (bool, string) {
		recs, _ := d.audit("action=auth.refused")
		counts = map[string]int{}
		for _, r := range recs {
			var after struct {
				Source, Reason string
				Count          int
			}
			_ = json.Unmarshal(r.After, &after)
			if after.Source == "127.0.0.1" && r.Result == "unauthenticated" {
				counts[after.Reason] += after.Count
			}
		}
		return counts["unknown"] == 25 && counts["missing"] == 1 && len(recs) <= 3, string(mustJSON(recs))
	})

	// The audit output is valid JSON in UTF-8.
	_, raw := d.audit("")
	if !utf8.Valid(raw) || !json.Valid(raw) {
		t.Fatalf("GET /audit is not valid UTF-8 JSON")
	}

	// The OpenAPI document, without credentials.
	resp, err := http.Get(d.url + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json: %d %v %q", resp.StatusCode, err, doc.OpenAPI)
	}
	if need := doc.Paths["/api/v1/tags/write"]["post"]["x-qubiq-need"]; need != "tag:write" {
		t.Fatalf("POST /tags/write needs %v in the document, want tag:write", need)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestHardening_AccessAndSessions through the real qubiqd: a key limited
// to Line1 gets the same answer for a known and an unknown tag outside it
// (REST read and write, a script, the WebSocket's subscribe); login failures from one
// address do not keep the user out from another; a panel's script stops
// at its next system.* call once its session is logged out.
func TestHardening_AccessAndSessions(t *testing.T) {
	d := startHardeningDaemon(t)

	var key struct{ Token string }
	if st, raw := d.call("POST", "/api/v1/apikeys", d.token, map[string]any{"name": "line1", "scopes": []string{"tag:read", "tag:write", "script:execute"},
		"write_level": "operate", "prefixes": []string{"Line1"}}, &key); st != 201 {
		t.Fatalf("create key: %d %s", st, raw)
	}
	var vals []tagValue
	if st, raw := d.call("POST", "/api/v1/tags/read", key.Token, map[string]any{"paths": []string{"Line2/Secret", "Line2/Nope"}}, &vals); st != 200 {
		t.Fatalf("read: %d %s", st, raw)
	}
	if len(vals) != 2 || vals[0].Quality != "Bad_UserAccessDenied" || vals[1].Quality != vals[0].Quality || vals[1].Reason != vals[0].Reason {
		t.Fatalf("read outside the prefixes: %+v, want the same Bad_UserAccessDenied for the known and the unknown tag", vals)
	}
	var writes []struct{ Path, Status, Reason string }
	if st, raw := d.call("POST", "/api/v1/tags/write", key.Token, map[string]any{"writes": []map[string]any{
		{"path": "Line2/Secret", "value": 1}, {"path": "Line2/Nope", "value": 1}}}, &writes); st != 200 {
		t.Fatalf("write: %d %s", st, raw)
	}
	if len(writes) != 2 || writes[0].Status != "Bad_UserAccessDenied" || writes[1] != (struct{ Path, Status, Reason string }{"Line2/Nope", writes[0].Status, writes[0].Reason}) {
		t.Fatalf("write outside the prefixes: %+v, want the same refusal for both", writes)
	}
	var run struct{ Result [][2]string }
	if st, raw := d.call("POST", "/api/v1/scripts/m/probe/run", key.Token, map[string]any{}, &run); st != 200 {
		t.Fatalf("probe run: %d %s", st, raw)
	}
	if len(run.Result) != 2 || run.Result[0][0] != "Bad_UserAccessDenied" || run.Result[1] != run.Result[0] {
		t.Fatalf("script read outside the prefixes: %v, want the same answer for both", run.Result)
	}

	// The WebSocket's subscribe answers the same for both.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(d.url, "http", "ws", 1)+"/api/v1/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + key.Token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := wsjson.Write(ctx, ws, map[string]any{"type": "subscribe", "paths": []string{"Line2/Secret", "Line2/Nope"}}); err != nil {
		t.Fatal(err)
	}
	for {
		var m struct {
			Type   string
			Values []tagValue
		}
		if err := wsjson.Read(ctx, ws, &m); err != nil {
			t.Fatalf("websocket: %v", err)
		}
		if m.Type != "values" {
			continue
		}
		if len(m.Values) != 2 || m.Values[0].Quality != "Bad_UserAccessDenied" || m.Values[1].Quality != m.Values[0].Quality ||
			m.Values[1].Reason != m.Values[0].Reason {
			t.Fatalf("subscribe outside the prefixes: %+v, want the same Bad_UserAccessDenied for both", m.Values)
		}
		break
	}
	ws.Close(websocket.StatusNormalClosure, "")

	// Login throttling per user and address.
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("op1-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.qubiqctl(d.token, "users", "add", "--name", "op1", "--realm", "operator", "--level", "operate", "--password-file", pwFile)
	attacker := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	loginFrom := func(c *http.Client, password string) int {
		b, _ := json.Marshal(map[string]string{"user": "op1", "password": password})
		resp, err := c.Post(d.url+"/api/v1/auth/login", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		if st := loginFrom(attacker, "wrong-password"); st != 401 {
			t.Fatalf("wrong password %d from 127.0.0.2: %d, want 401", i+1, st)
		}
	}
	if st := loginFrom(attacker, "op1-password"); st != 429 {
		t.Fatalf("right password from the failing address right after 5 failures: %d, want 429", st)
	}
	op, st := d.login("op1", "op1-password")
	if st != 200 {
		t.Fatalf("the rightful user from 127.0.0.1: %d, want 200 (not locked out by another address)", st)
	}

	// A panel's script stops when its session ends.
	type answer struct {
		code int
		body string
	}
	pressed := make(chan answer, 1)
	go func() {
		code, body := op.do("POST", "/api/v1/scripts/m/loop/run", "", "", map[string]string{"X-CSRF-Token": op.csrf, "X-Qubiq-Panel": "pump1"})
		pressed <- answer{code, body}
	}()
	waitFor(t, 20*time.Second, "the panel's loop runs", func() (bool, string) {
		select {
		case a := <-pressed:
			t.Fatalf("the press ended before the logout: %d %s", a.code, a.body)
		default:
		}
		st, body := d.raw("GET", "/api/v1/vars/loop_started", "", "")
		return st == 200, body
	})
	if code, body := op.do("POST", "/api/v1/auth/logout", "", "", map[string]string{"X-CSRF-Token": op.csrf}); code != 204 {
		t.Fatalf("logout: %d %s", code, body)
	}
	// Without the check the loop would run to its own 30 s timeout and
	// answer 504 "timeout".
	if a := <-pressed; a.code != 403 || !strings.Contains(a.body, `"kind":"permission_denied"`) || !strings.Contains(a.body, "session") {
		t.Fatalf("the press after logout: %d %s, want 403 permission_denied naming the ended session", a.code, a.body)
	}
	recs, _ := d.audit("action=liveview.press")
	if len(recs) != 1 || recs[0].Result != "permission_denied" {
		t.Fatalf("liveview.press records %+v, want one with result permission_denied", recs)
	}
}
