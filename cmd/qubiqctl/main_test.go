package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeDaemon answers the API's routes with canned bodies and records the
// requests it got.
type fakeDaemon struct {
	mu   sync.Mutex
	reqs []recorded
	srv  *httptest.Server
	// answers maps "METHOD /path" to status and body; a missing route is a
	// 404 problem.
	answers map[string]answer
}

type recorded struct{ method, path, auth, body string }

type answer struct {
	status int
	body   string
}

func newFakeDaemon(t *testing.T, answers map[string]answer) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{answers: answers}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), string(b)})
		f.mu.Unlock()
		a, ok := f.answers[r.Method+" "+r.URL.Path]
		if !ok {
			a = answer{404, `{"type":"urn:qubiq:problem:not_found","title":"Not Found","status":404,"detail":"no route","kind":"not_found"}`}
		}
		if a.status >= 400 && !strings.HasSuffix(r.URL.Path, "/health") {
			w.Header().Set("Content-Type", "application/problem+json")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		fmt.Fprint(w, a.body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// find returns the last request of method and path.
func (f *fakeDaemon) find(t *testing.T, method, path string) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.reqs) - 1; i >= 0; i-- {
		if f.reqs[i].method == method && f.reqs[i].path == path {
			return f.reqs[i]
		}
	}
	t.Fatalf("the daemon got no %s %s", method, path)
	return recorded{}
}

func (f *fakeDaemon) last(t *testing.T) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the daemon got no request")
	}
	return f.reqs[len(f.reqs)-1]
}

// runCLI runs qubiqctl with args and returns exit code, stdout, stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// clearEnv makes the test independent of the caller's QUBIQ_* variables.
func clearEnv(t *testing.T) {
	t.Setenv("QUBIQ_URL", "")
	t.Setenv("QUBIQ_API_KEY", "")
}

const healthBody = `{"status":"degraded","reasons":["python runtime missing: /usr/lib/qubiq/current/python/bin/python3"],
"warnings":["/etc/qubiq/qubiq.yaml:12: mqtt: this qubiqd does not act on this block; it is ignored","python.pids_max: unlimited: script workers run without that limit"],
"version":"1.4.0","uptime_s":3723,"sandbox":{"mode":"cgroup2","limits":{"memory_max":268435456,"memory":"enforced (memory.max)"},"hardening":{"netns":"active","landlock":"unavailable: kernel without Landlock"},"python":{"status":"missing","version":"","path":"/usr/lib/qubiq/current/python/bin/python3"},"linter":"syntax-only"},
"devices":{"plc1":{"state":"connected"},"ua1":{"state":"disconnected","reason":"certificate not trusted"}},"escape_hatch":false}`

const readBody = `[{"path":"Line1/Big","value":18446744073709551615,"quality":"Good","timestamp":"2025-03-01T12:00:00.000000000Z"},
{"path":"Line1/Exact","value":9007199254740993,"quality":"Good","timestamp":"2025-03-01T12:00:00.500000000Z"},
{"path":"Line1/Gone","value":null,"quality":"Bad_NodeIdUnknown","timestamp":"2025-03-01T12:00:00.000000000Z","reason":"unknown tag"}]`

func TestRun_Status_Table(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/health": {200, healthBody}})
	code, out, errOut := runCLI("--url", d.srv.URL, "status")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{
		"status        degraded\n",
		"reasons       python runtime missing: /usr/lib/qubiq/current/python/bin/python3\n" +
			"warnings      /etc/qubiq/qubiq.yaml:12: mqtt: this qubiqd does not act on this block; it is ignored\n" +
			"              python.pids_max: unlimited: script workers run without that limit\n" +
			"version       1.4.0\n",
		"uptime        1h2m3s\n",
		"sandbox       mode cgroup2, linter syntax-only\n",
		// one line per key, in the daemon's order, strings unquoted
		"limits        memory_max: 268435456\n              memory: enforced (memory.max)\nhardening     netns: active\n              landlock: unavailable: kernel without Landlock\n",
		"escape hatch  off\n",
		"DEVICE  STATE         REASON\nplc1    connected\nua1     disconnected  certificate not trusted\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRun_Status_FailedExits1(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/health": {503, `{"status":"failed","reasons":["store: open timeout"],"version":"1.4.0","uptime_s":1,"sandbox":{"mode":"none","python":{"status":"ok","version":"3.12","path":"/p"},"linter":"ruff"},"devices":{},"escape_hatch":true}`}})
	code, out, errOut := runCLI("--url", d.srv.URL, "status")
	if code != 1 || !strings.Contains(errOut, `health is "failed": store: open timeout`) {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	if !strings.Contains(out, "status        failed\n") || !strings.Contains(out, "escape hatch  ON") {
		t.Errorf("output:\n%s", out)
	}
}

func TestRun_TagsRead_Table(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/tags/read": {200, readBody}})
	code, out, errOut := runCLI("--url", d.srv.URL, "--api-key", "k", "tags", "read", "Line1/Big", "Line1/Exact", "Line1/Gone")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	want := "" +
		"PATH         VALUE                 QUALITY            TIMESTAMP                 REASON\n" +
		"Line1/Big    18446744073709551615  Good               2025-03-01T12:00:00.000Z\n" +
		"Line1/Exact  9007199254740993      Good               2025-03-01T12:00:00.500Z\n" +
		"Line1/Gone   null                  Bad_NodeIdUnknown  2025-03-01T12:00:00.000Z  unknown tag\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	if r := d.find(t, "POST", "/api/v1/tags/read"); r.body != `{"paths":["Line1/Big","Line1/Exact","Line1/Gone"]}` || r.auth != "Bearer k" {
		t.Errorf("request = %+v", r)
	}
}

func TestRun_TagsRead_JSON(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/tags/read": {200, readBody}})
	// --json after the subcommand works too.
	code, out, _ := runCLI("--url", d.srv.URL, "tags", "read", "--json", "Line1/Big", "Line1/Exact", "Line1/Gone")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if got[0]["value"] != json.Number("18446744073709551615") || got[1]["value"] != json.Number("9007199254740993") ||
		got[2]["value"] != nil || got[2]["reason"] != "unknown tag" || got[1]["timestamp"] != "2025-03-01T12:00:00.500000000Z" {
		t.Errorf("--json output = %v", got)
	}
}

func TestRun_TagsWrite_Values(t *testing.T) {
	clearEnv(t)
	good := `[{"path":"A","status":"Good"},{"path":"B","status":"Good"},{"path":"C","status":"Good"},{"path":"D","status":"Good"},{"path":"E","status":"Good"},{"path":"F","status":"Good"},{"path":"G","status":"Good"}]`
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/tags/write": {200, good}})
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "write", "A=42", "B=hello world", `C="42"`,
		"D=18446744073709551615", "E=[1,2.5]", "F=true", "G=")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	wantBody := `{"writes":[{"path":"A","value":42},{"path":"B","value":"hello world"},{"path":"C","value":"42"},` +
		`{"path":"D","value":18446744073709551615},{"path":"E","value":[1,2.5]},{"path":"F","value":true},{"path":"G","value":""}]}`
	if r := d.last(t); r.body != wantBody {
		t.Errorf("body = %s\nwant   %s", r.body, wantBody)
	}
	if !strings.HasPrefix(out, "PATH  STATUS  REASON\nA     Good\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestRun_TagsWrite_NotGoodExits1(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/tags/write": {200,
		`[{"path":"A","status":"Good"},{"path":"B","status":"Bad_UserAccessDenied","reason":"write level \"supervise\" required"}]`}})
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "write", "A=1", "B=2")
	if code != 1 || !strings.Contains(errOut, "1 of 2 writes were not written") {
		t.Fatalf("exit %d stderr %q, want 1 and a count", code, errOut)
	}
	if !strings.Contains(out, `B     Bad_UserAccessDenied  write level "supervise" required`) {
		t.Errorf("output:\n%s", out)
	}
}

func TestRun_ExitCodes(t *testing.T) {
	clearEnv(t)
	forbidden := `{"type":"urn:qubiq:problem:permission_denied","title":"Forbidden","status":403,"detail":"missing scope \"tag:write\" for POST /api/v1/tags/write","kind":"permission_denied"}`
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/tags":                     {200, `[]`},
		"POST /api/v1/tags/write":              {403, forbidden},
		"POST /api/v1/scripts/pumps/start/run": {503, `{"type":"urn:qubiq:problem:busy","title":"Service Unavailable","status":503,"detail":"all workers busy","kind":"busy"}`},
	})
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		name      string
		args      []string
		want      int
		wantErr   string // in stderr
		wantUsage bool
	}{
		{"ok", []string{"--url", d.srv.URL, "tags", "list"}, 0, "", false},
		{"help", []string{"help"}, 0, "", false},
		{"-h", []string{"-h"}, 0, "", false},
		{"no command", []string{}, 2, "missing command", true},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`, true},
		{"unknown sub-subcommand", []string{"tags", "delete"}, 2, `unknown subcommand "tags delete"`, true},
		{"group without subcommand", []string{"tags"}, 2, "tags: missing subcommand", true},
		{"unknown global flag", []string{"--frob", "status"}, 2, "qubiqctl: unknown flag --frob\n", true},
		{"unknown subcommand flag", []string{"tags", "list", "--frob"}, 2, "qubiqctl: tags list: unknown flag --frob\n", true},
		{"bad timeout", []string{"--timeout", "abc", "status"}, 2, `qubiqctl: --timeout "abc": want a duration such as 30s, 500ms or 2m`, true},
		{"bad subcommand timeout", []string{"status", "--timeout", "5"}, 2, `qubiqctl: status: --timeout "5": want a duration such as 30s`, true},
		{"flag without value", []string{"apikeys", "create", "--name"}, 2, "qubiqctl: apikeys create: --name needs a value\n", true},
		{"missing paths", []string{"tags", "read"}, 2, "want PATH|FOLDER|PATTERN... | --all", true},
		{"bad write arg", []string{"tags", "write", "novalue"}, 2, `"novalue" is not PATH=VALUE`, true},
		{"write value apart", []string{"tags", "write", "Line1/SP", "900"}, 2, `"Line1/SP" is not PATH=VALUE; did you mean "Line1/SP=900"?`, true},
		{"write spaced =", []string{"tags", "write", "Line1/SP", "=", "900"}, 2, `did you mean "Line1/SP=900"?`, true},
		{"bad run target", []string{"scripts", "run", "pumps"}, 2, `"pumps" is not MODULE.ENTRY`, true},
		{"bad run args", []string{"scripts", "run", "pumps.start", "--args", "{oops"}, 2, "is not JSON", true},
		{"key without name", []string{"apikeys", "create", "--scopes", "tag:read"}, 2, "--name and --write-level are required", true},
		{"bad url", []string{"--url", "localhost:8080", "status"}, 2, "--url", true},
		{"forbidden", []string{"--url", d.srv.URL, "--api-key", "k", "tags", "write", "A=1"}, 1,
			`qubiqctl: missing scope "tag:write" for POST /api/v1/tags/write (HTTP 403, permission_denied)`, false},
		{"busy", []string{"--url", d.srv.URL, "scripts", "run", "pumps.start"}, 1, "all workers busy (HTTP 503, busy)", false},
		{"not found", []string{"--url", d.srv.URL, "apikeys", "revoke", "k9"}, 1, "no route (HTTP 404, not_found)", false},
		{"daemon down", []string{"--url", dead, "status"}, 1, "is qubiqd running at " + dead, false},
		// the file named once, not os's "read F: open F: ..."
		{"missing file", []string{"--url", d.srv.URL, "project", "import", "/nonexistent/plant.yaml"}, 1,
			"qubiqctl: /nonexistent/plant.yaml: no such file or directory\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(tt.args...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.want, out, errOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tt.wantErr)
			}
			if got := strings.Contains(errOut, "usage: qubiqctl"); got != tt.wantUsage {
				t.Errorf("usage printed on stderr: %v, want %v", got, tt.wantUsage)
			}
			if tt.name == "help" || tt.name == "-h" {
				if !strings.Contains(out, "usage: qubiqctl") {
					t.Errorf("help: stdout lacks the usage")
				}
			}
		})
	}
}

func TestRun_Env_URLAndAPIKey(t *testing.T) {
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/devices": {200, `[{"name":"plc1","driver":"modbus","state":"connected","tags":12}]`}})
	t.Setenv("QUBIQ_URL", d.srv.URL)
	t.Setenv("QUBIQ_API_KEY", "from-env")
	code, out, errOut := runCLI("devices", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if r := d.last(t); r.auth != "Bearer from-env" {
		t.Errorf("Authorization = %q, want the env key", r.auth)
	}
	if out != "NAME  DRIVER  STATE      TAGS  REQUESTS  ERRORS  P50  P99  LAST GOOD  URL  REASON\nplc1  modbus  connected  12    -         -       -    -    -          -\n" {
		t.Errorf("output:\n%q", out)
	}
	// The flag wins over the environment, before or after the subcommand.
	for _, args := range [][]string{{"--api-key", "from-flag", "devices", "list"}, {"devices", "list", "--api-key", "from-flag"}} {
		if code, _, errOut := runCLI(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if r := d.last(t); r.auth != "Bearer from-flag" {
			t.Errorf("%v: Authorization = %q, want the flag's", args, r.auth)
		}
	}
	t.Setenv("QUBIQ_URL", "")
	t.Setenv("QUBIQ_API_KEY", "")
	code, _, errOut = runCLI("--timeout", "200ms", "devices", "list")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:8080") {
		t.Errorf("default URL: exit %d stderr %q, want an error naming http://127.0.0.1:8080", code, errOut)
	}
}

func TestRun_Scripts(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"PUT /api/v1/scripts/pumps": {200, `{"module":"pumps","version":4,"entries":[{"name":"start","timeout_ms":2000},{"name":"stop","timeout_ms":10000}],` +
			`"diagnostics":[{"line":3,"column":5,"end_line":3,"end_column":9,"code":"F841","message":"local variable 'x' is assigned to but never used","severity":"warning"}]}`},
		"POST /api/v1/scripts/pumps/start/run": {200, `{"result":{"written":true,"n":18446744073709551615},"logs":[{"level":"info","msg":"starting"}],"duration_ms":42}`},
		"POST /api/v1/scripts/lint":            {200, `{"linter":"ruff","diagnostics":[{"line":1,"column":1,"end_line":1,"end_column":4,"code":"E999","message":"SyntaxError: invalid syntax","severity":"error"}]}`},
		"GET /api/v1/scripts":                  {200, `[{"module":"pumps","version":4,"entries":[{"name":"start","timeout_ms":2000},{"name":"stop","timeout_ms":10000}],"liveview":["start"]}]`},
	})
	file := filepath.Join(t.TempDir(), "pumps.py")
	if err := os.WriteFile(file, []byte("@gateway(timeout_ms=2000)\ndef start(args):\n    x = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("push", func(t *testing.T) {
		code, out, errOut := runCLI("--url", d.srv.URL, "scripts", "push", "pumps", file)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		// The LOCATION column's width depends on the temp path.
		re := regexp.MustCompile(`^saved pumps version 4\n\nENTRY  TIMEOUT\nstart  2s\nstop   10s\n\n` +
			`LOCATION +SEVERITY +CODE +MESSAGE\n` + regexp.QuoteMeta(file) + `:3:5  warning   F841  local variable 'x' is assigned to but never used\n$`)
		if !re.MatchString(out) {
			t.Errorf("output:\n%s", out)
		}
		var body map[string]string
		if err := json.Unmarshal([]byte(d.last(t).body), &body); err != nil || !strings.HasPrefix(body["code"], "@gateway") {
			t.Errorf("body = %s", d.last(t).body)
		}
	})
	t.Run("run", func(t *testing.T) {
		code, out, errOut := runCLI("--url", d.srv.URL, "scripts", "run", "pumps.start", "--args", `{"rpm": 9007199254740993}`)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if r := d.last(t); r.body != `{"args":{"rpm":9007199254740993}}` {
			t.Errorf("body = %s", r.body)
		}
		want := "result    {\"written\":true,\"n\":18446744073709551615}\nduration  42ms\n\nLEVEL  MESSAGE\ninfo   starting\n"
		if out != want {
			t.Errorf("output:\n%s\nwant:\n%s", out, want)
		}
	})
	t.Run("run --json", func(t *testing.T) {
		code, out, _ := runCLI("--url", d.srv.URL, "--json", "scripts", "run", "pumps.start")
		if code != 0 || !strings.Contains(out, `"n": 18446744073709551615`) || !strings.Contains(out, `"duration_ms": 42`) {
			t.Errorf("exit %d output:\n%s", code, out)
		}
		if r := d.last(t); r.body != `{"args":{}}` {
			t.Errorf("body without --args = %s, want {\"args\":{}}", r.body)
		}
	})
	t.Run("lint error exits 1", func(t *testing.T) {
		code, out, errOut := runCLI("--url", d.srv.URL, "scripts", "lint", file)
		if code != 1 || !strings.Contains(errOut, "1 error(s) (linter ruff)") {
			t.Fatalf("exit %d stderr %q", code, errOut)
		}
		if !strings.Contains(out, file+":1:1  error     E999  SyntaxError: invalid syntax") {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("list", func(t *testing.T) {
		code, out, _ := runCLI("--url", d.srv.URL, "scripts", "list")
		want := "MODULE  VERSION  ENTRIES     LIVEVIEW\npumps   4        start,stop  start\n"
		if code != 0 || out != want {
			t.Errorf("exit %d output:\n%s\nwant:\n%s", code, out, want)
		}
	})
	t.Run("push missing file", func(t *testing.T) {
		code, _, errOut := runCLI("--url", d.srv.URL, "scripts", "push", "pumps", filepath.Join(t.TempDir(), "nope.py"))
		if code != 1 || !strings.Contains(errOut, "nope.py") {
			t.Errorf("exit %d stderr %q", code, errOut)
		}
	})
}

func TestRun_APIKeys(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"POST /api/v1/apikeys":      {201, `{"id":"k7","token":"qk_abc"}`},
		"GET /api/v1/apikeys":       {200, `[{"id":"k7","name":"scada","scopes":["tag:read","tag:write"],"write_level":"operate","prefixes":["Line1"],"created":"2025-03-01T12:00:00Z"}]`},
		"DELETE /api/v1/apikeys/k7": {204, ``},
		"DELETE /api/v1/apikeys/k8": {200, `{"already":true,"detail":"api key \"k8\" was already revoked; nothing changed"}`},
	})
	code, out, errOut := runCLI("--url", d.srv.URL, "--api-key", "admin", "apikeys", "create", "--name", "scada",
		"--scopes", "tag:read, tag:write", "--write-level", "operate", "--prefixes", "Line1", "--expires", "2030-01-01T00:00:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	wantBody := `{"name":"scada","scopes":["tag:read","tag:write"],"write_level":"operate","prefixes":["Line1"],"expires":"2030-01-01T00:00:00Z"}`
	if r := d.last(t); r.body != wantBody {
		t.Errorf("body = %s\nwant   %s", r.body, wantBody)
	}
	if out != "id     k7\ntoken  qk_abc\n" || !strings.Contains(errOut, "shown only this once") {
		t.Errorf("output %q stderr %q", out, errOut)
	}

	code, out, _ = runCLI("--url", d.srv.URL, "apikeys", "list")
	want := "ID  NAME   SCOPES              WRITE LEVEL  PERMISSIONS  PREFIXES  EXPIRES  CREATED\n" +
		"k7  scada  tag:read,tag:write  operate                   Line1     never    2025-03-01T12:00:00Z\n"
	if code != 0 || out != want {
		t.Errorf("list: exit %d output:\n%s\nwant:\n%s", code, out, want)
	}

	code, out, _ = runCLI("--url", d.srv.URL, "apikeys", "revoke", "k7")
	if code != 0 || out != "revoked k7\n" {
		t.Errorf("revoke: exit %d output %q", code, out)
	}
	// Revoking a revoked key says so (the daemon's detail).
	code, out, _ = runCLI("--url", d.srv.URL, "apikeys", "revoke", "k8")
	if code != 0 || out != "api key \"k8\" was already revoked; nothing changed\n" {
		t.Errorf("revoke a revoked key: exit %d output %q", code, out)
	}
	code, _, errOut = runCLI("--url", d.srv.URL, "apikeys", "create", "--name", "x", "--write-level", "view", "--expires", "tomorrow")
	if code != 2 || !strings.Contains(errOut, `--expires "tomorrow" is not RFC 3339`) {
		t.Errorf("bad --expires: exit %d stderr %q", code, errOut)
	}
}

func TestParseInterspersed_Flags(t *testing.T) {
	tests := []struct {
		args     []string
		wantPos  []string
		wantArgs string
	}{
		{[]string{"a", "--args", "1", "b"}, []string{"a", "b"}, "1"},
		{[]string{"--args=2", "a"}, []string{"a"}, "2"},
		{[]string{"a", "--", "--args", "x"}, []string{"a", "--args", "x"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var o opts
			fs := newFlagSetForTest(&o)
			pos, err := parseInterspersed(fs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(pos, "|") != strings.Join(tt.wantPos, "|") || o.args != tt.wantArgs {
				t.Errorf("pos %q args %q, want %q %q", pos, o.args, tt.wantPos, tt.wantArgs)
			}
		})
	}
}

func newFlagSetForTest(o *opts) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.args, "args", "", "")
	return fs
}

// TestCleanCell: text that would act on a terminal (an ANSI escape, NUL,
// a right-to-left override) is shown escaped in tables; tabs and newlines
// become spaces; letters of every script pass as they are.
func TestCleanCell(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[31mred":       `\u001b[31mred`,
		"a\x00b":            `a\u0000b`,
		"evil\u202egnp.exe": `evil\u202egnp.exe`,
		"line\none\ttab":    "line one tab",
		"Kühlung Vorlauf":   "Kühlung Vorlauf",
	} {
		if got := cleanCell(in); got != want {
			t.Errorf("cleanCell(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRun_Version: --version prints qubiqctl's build version and exits 0
// without a daemon to ask (the URL points nowhere).
func TestRun_Version(t *testing.T) {
	clearEnv(t)
	code, out, errOut := runCLI("--url", "http://127.0.0.1:1", "--version")
	if code != exitOK || out != "qubiqctl "+version+"\n" || errOut != "" {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errOut, "qubiqctl "+version+"\n")
	}
}
