//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"qubiq.dev/edge/internal/peers"
)

// The issue-4 proofs, through real Python scripts in the sandbox and REST
// against the built qubiqd: system.db on SQLite and PostgreSQL, vars,
// files, hist, message.send, runOnGateway, and the scope matrix.

const systemAPIProject = `
devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/T, device: sim, address: memory, type: float64, history: {enabled: true}}
  - {path: Line1/Ramp, device: sim, address: "ramp(0,100,10s)", type: float64, scan: 100ms, history: {enabled: true}}
  - {path: Lv/View, device: sim, address: memory, type: float64, write_level: view}
  - {path: Lv/Operate, device: sim, address: memory, type: float64, write_level: operate}
  - {path: Lv/Supervise, device: sim, address: memory, type: float64, write_level: supervise}
  - {path: Lv/Design, device: sim, address: memory, type: float64, write_level: design}
connections:
  - {name: pg, driver: postgres, dsn_file: pg.dsn}
named_queries:
  - {name: batch_by_id, database: local, sql: "SELECT * FROM batches WHERE id = :id", params: {id: int}}
  - {name: bad_update, database: local, sql: "UPDATE batches SET name = 'hacked' WHERE id = :id", params: {id: int}}
  - {name: pg_batch_by_id, database: pg, sql: "SELECT * FROM batches WHERE id = :id", params: {id: int}}
  - {name: pg_bad_update, database: pg, sql: "UPDATE batches SET name = 'hacked' WHERE id = :id", params: {id: int}}
message_handlers:
  - {name: batch_done, entry: api.on_batch_done}
  - {name: noop, entry: api.noop}
`

const systemAPIScript = `
import datetime

def noop(args):
    return args

def on_batch_done(payload):
    system.vars.set("last_batch", payload)
    return {"got": payload}

def send(args):
    return system.message.send("batch_done", args)

def nested(args):
    return system.script.runOnGateway("api.noop", args)

@gateway(timeout_ms=30000)
def setup(args):
    db = args["db"]
    system.db.runQuery("CREATE TABLE batches (id INTEGER PRIMARY KEY, name TEXT, done TIMESTAMP)", database=db)
    ph = "?, ?, ?" if db == "local" else "$1, $2, $3"
    n = system.db.runQuery("INSERT INTO batches VALUES (" + ph + ")", [7, "B-7", "2025-03-01T12:00:00Z"], database=db)
    return n

@gateway(timeout_ms=30000)
def named(args):
    rows = system.db.runNamedQuery(args["q"], {"id": 7})
    try:
        system.db.runNamedQuery(args["bad"], {"id": 7})
        refused = None
    except system.PermissionDenied as e:
        refused = str(e)
    after = system.db.runQuery("SELECT name FROM batches WHERE id = 7", database=args["db"])
    return {"rows": rows, "refused": refused, "after": after}

@gateway(timeout_ms=30000)
def tx_idle(args):
    db = args["db"]
    tx = system.db.beginTransaction(database=db, timeoutMs=300)
    system.db.runQuery("UPDATE batches SET name = 'in-tx' WHERE id = 7", tx=tx)
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=1.5)
    while datetime.datetime.now() < deadline:
        pass
    try:
        system.db.runQuery("SELECT 1 AS one", tx=tx)
        later = "used"
    except system.CallError as e:
        later = str(e)
    try:
        system.db.commitTransaction(tx)
        commit = "committed"
    except system.CallError as e:
        commit = str(e)
    after = system.db.runQuery("SELECT name FROM batches WHERE id = 7", database=db)
    return {"later": later, "commit": commit, "after": after}

def files(args):
    out = {}
    system.files.save("reports/a.txt", "hello")
    out["read"] = system.files.read("reports/a.txt").decode("utf-8")
    out["size"] = system.files.size("reports/a.txt")
    out["chunk"] = system.files.readChunk("reports/a.txt", 1, 3).decode("utf-8")
    for p in ["../qubiq.db", "/etc/passwd", "a/../../secrets.key", "escape", "etc-link/passwd"]:
        try:
            system.files.read(p)
            out[p] = "read"
        except system.PermissionDenied as e:
            out[p] = "denied: " + str(e)
    try:
        system.files.save("../evil.txt", "x")
        out["save-escape"] = "saved"
    except system.PermissionDenied as e:
        out["save-escape"] = "denied: " + str(e)
    system.files.delete("reports/a.txt")
    return out

@gateway(timeout_ms=600000)
def incr(args):
    for i in range(args["n"]):
        system.vars.incr(args["key"])
    return system.vars.get(args["key"])

def setvar(args):
    system.vars.set(args["key"], args["value"])
    return "SET"

def trends(args):
    now = datetime.datetime.now(datetime.timezone.utc)
    start = now - datetime.timedelta(seconds=args["secs"])
    raw = system.hist.getTrends(["Line1/Ramp"], start, now)
    avg = system.hist.getTrends(["Line1/Ramp"], start, now, intervalMs=1000, aggregate="avg")
    return {"raw": len(raw[0]["points"]), "avg": len(avg[0]["points"]), "point": raw[0]["points"][-1], "known": raw[0]["known"]}

def writes(args):
    return system.tag.write(["Lv/View", "Lv/Operate", "Lv/Supervise", "Lv/Design"], [1.0, 2.0, 3.0, 4.0])

def probe(args):
    calls = {
        "tag.read": lambda: system.tag.read(["Line1/T"]),
        "tag.browse": lambda: system.tag.browse(""),
        "tag.write": lambda: system.tag.write(["Line1/T"], [1.0]),
        "db.runNamedQuery": lambda: system.db.runNamedQuery("batch_by_id", {"id": 7}),
        "db.runQuery": lambda: system.db.runQuery("SELECT 1 AS one"),
        "db.callProc": lambda: system.db.callProc("nosuch", database="pg"),
        "db.beginTransaction": lambda: system.db.closeTransaction(system.db.beginTransaction()),
        "db.commitTransaction": lambda: system.db.commitTransaction("tx-none"),
        "db.rollbackTransaction": lambda: system.db.rollbackTransaction("tx-none"),
        "db.closeTransaction": lambda: system.db.closeTransaction("tx-none"),
        "hist.getTrends": lambda: system.hist.getTrends(["Line1/T"], "2025-01-01T00:00:00Z", None),
        "vars.get": lambda: system.vars.get("probe"),
        "vars.keys": lambda: system.vars.keys(""),
        "vars.list": lambda: system.vars.list("probe"),
        "vars.set": lambda: system.vars.set("probe", 1),
        "vars.delete": lambda: system.vars.delete("probe"),
        "vars.incr": lambda: system.vars.incr("probe-n"),
        "files.read": lambda: system.files.read("probe.txt"),
        "files.size": lambda: system.files.size("probe.txt"),
        "files.readChunk": lambda: system.files.readChunk("probe.txt", 0, 1),
        "files.save": lambda: system.files.save("probe.txt", "p"),
        "files.delete": lambda: system.files.delete("probe-none.txt"),
        "message.send": lambda: system.message.send("noop", 1),
        "script.runOnGateway": lambda: system.script.runOnGateway("api.noop", 1),
    }
    out = {}
    for m in calls:
        try:
            calls[m]()
            out[m] = "ok"
        except system.PermissionDenied as e:
            out[m] = "denied: " + str(e)
        except system.CallError as e:
            out[m] = "error: " + str(e)
    return out
`

// methodScope is the scope table of docs/security.md, "Scopes".
var methodScope = map[string]string{
	"tag.read": "tag:read", "tag.browse": "tag:read", "tag.write": "tag:write",
	"db.runNamedQuery": "db:read", "db.runQuery": "db:write", "db.callProc": "db:write",
	"db.beginTransaction": "db:write", "db.commitTransaction": "db:write",
	"db.rollbackTransaction": "db:write", "db.closeTransaction": "db:write",
	"hist.getTrends": "hist:read",
	"vars.get":       "vars:read", "vars.keys": "vars:read", "vars.list": "vars:read",
	"vars.set": "vars:write", "vars.delete": "vars:write", "vars.incr": "vars:write",
	"files.read": "file:read", "files.size": "file:read", "files.readChunk": "file:read",
	"files.save": "file:write", "files.delete": "file:write",
	"message.send": "script:execute", "script.runOnGateway": "script:execute",
}

var allScopes = []string{"tag:read", "tag:write", "db:read", "db:write", "hist:read", "hist:write",
	"vars:read", "vars:write", "file:read", "file:write", "script:execute"}

// pgDSN is a DSN on a fresh schema of the PostgreSQL test server
// (internal/peers), dropped when t ends.
func pgDSN(t *testing.T) string {
	_, dsn := peers.PostgresSchema(t, "qubiq_it_")
	return dsn
}

// startSystemAPI starts qubiqd with the system API project and the api
// module saved.
func startSystemAPI(t *testing.T) *daemon {
	t.Helper()
	d := newDaemon(t, systemAPIProject)
	if err := os.WriteFile(filepath.Join(d.dir, "pg.dsn"), []byte(pgDSN(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.cfg, []byte(strings.Replace(string(cfg), "max: 1m", "max: 10m", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start()
	if st, body := d.call("PUT", "/api/v1/scripts/api", d.token, map[string]any{"code": systemAPIScript}, nil); st != 200 {
		t.Fatalf("save api module: %d %s", st, body)
	}
	return d
}

// run runs api.entry with token and decodes the result into out.
func (d *daemon) run(token, entry string, args any, out any) {
	d.t.Helper()
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	st, body := d.call("POST", "/api/v1/scripts/api/"+entry+"/run", token, map[string]any{"args": args}, &res)
	if st != 200 {
		d.t.Fatalf("run api.%s: %d %s", entry, st, body)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result, out); err != nil {
			d.t.Fatalf("api.%s result %s: %v", entry, res.Result, err)
		}
	}
}

// TestSystemAPI_DB_SQLiteAndPostgres: through scripts, on both databases:
// a named query works with typed params; one whose SQL is an UPDATE fails
// with a read-only refusal and changes nothing; a transaction left idle
// past its timeoutMs is rolled back and its handle refused with an error
// that says so.
func TestSystemAPI_DB_SQLiteAndPostgres(t *testing.T) {
	d := startSystemAPI(t)
	for _, c := range []struct{ db, q, bad string }{{"local", "batch_by_id", "bad_update"}, {"pg", "pg_batch_by_id", "pg_bad_update"}} {
		t.Run(c.db, func(t *testing.T) {
			var n int
			d.run(d.token, "setup", map[string]any{"db": c.db}, &n)
			if n != 1 {
				t.Fatalf("insert affected %d rows", n)
			}
			var named struct {
				Rows    []map[string]any `json:"rows"`
				Refused *string          `json:"refused"`
				After   []map[string]any `json:"after"`
			}
			d.run(d.token, "named", map[string]any{"db": c.db, "q": c.q, "bad": c.bad}, &named)
			if len(named.Rows) != 1 || named.Rows[0]["name"] != "B-7" || fmt.Sprint(named.Rows[0]["id"]) != "7" {
				t.Fatalf("named rows %+v", named.Rows)
			}
			if done := fmt.Sprint(named.Rows[0]["done"]); !strings.Contains(done, "2025-03-01") {
				t.Fatalf("timestamp column %v", done)
			}
			if named.Refused == nil || !strings.Contains(*named.Refused, "read-only") {
				t.Fatalf("UPDATE as a named query: %v; want a read-only refusal", named.Refused)
			}
			if named.After[0]["name"] != "B-7" {
				t.Fatalf("after the refused UPDATE: %+v", named.After)
			}
			var tx struct {
				Later, Commit string
				After         []map[string]any
			}
			d.run(d.token, "tx_idle", map[string]any{"db": c.db}, &tx)
			if !strings.Contains(tx.Later, "rolled back by the daemon") || !strings.Contains(tx.Later, "timeoutMs 300") {
				t.Fatalf("use after the idle timeout: %q", tx.Later)
			}
			if !strings.Contains(tx.Commit, "rolled back by the daemon") {
				t.Fatalf("commit after the idle timeout: %q", tx.Commit)
			}
			if tx.After[0]["name"] != "B-7" {
				t.Fatalf("the expired transaction's update survived: %+v", tx.After)
			}
		})
	}
	// REST: the named query with db:read, refused without it.
	reader := d.apiKey("dbreader", []string{"db:read"}, "view")
	var res struct {
		Rows []map[string]any `json:"rows"`
	}
	if st, body := d.call("POST", "/api/v1/db/named/pg_batch_by_id", reader, map[string]any{"params": map[string]any{"id": 7}}, &res); st != 200 || len(res.Rows) != 1 {
		t.Fatalf("REST named query: %d %s", st, body)
	}
	if st, body := d.call("POST", "/api/v1/db/named/bad_update", reader, map[string]any{"params": map[string]any{"id": 7}}, nil); st != 403 || !strings.Contains(string(body), "read-only") {
		t.Fatalf("REST named UPDATE: %d %s; want 403 read-only", st, body)
	}
	noDB := d.apiKey("nodb", []string{"tag:read"}, "view")
	if st, _ := d.call("POST", "/api/v1/db/named/batch_by_id", noDB, map[string]any{"params": map[string]any{"id": 7}}, nil); st != 403 {
		t.Fatalf("REST named query without db:read: %d", st)
	}
}

// TestSystemAPI_Files_EscapesRefused: traversal, absolute paths and
// symlink escapes are refused with PermissionDenied; inside works.
func TestSystemAPI_Files_EscapesRefused(t *testing.T) {
	d := startSystemAPI(t)
	root := filepath.Join(d.dir, "data", "files")
	if err := os.Symlink("../secrets.key", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "etc-link")); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	d.run(d.token, "files", nil, &out)
	if fmt.Sprint(out["size"]) != "5" {
		t.Fatalf("size %v", out["size"])
	}
	if out["read"] != "hello" || out["chunk"] != "ell" {
		t.Fatalf("read %v, chunk %v; want hello and ell", out["read"], out["chunk"])
	}
	for _, p := range []string{"../qubiq.db", "/etc/passwd", "a/../../secrets.key", "escape", "etc-link/passwd", "save-escape"} {
		if s := fmt.Sprint(out[p]); !strings.HasPrefix(s, "denied: ") || !strings.Contains(s, "files root") {
			t.Errorf("%s: %v; want PermissionDenied naming the files root", p, s)
		}
	}
	if _, err := os.Stat(filepath.Join(d.dir, "data", "evil.txt")); !os.IsNotExist(err) {
		t.Fatal("a file was written outside the files root")
	}
	// REST: file:write then file:read; traversal encoded in the path is
	// refused.
	rw := d.apiKey("files", []string{"file:read", "file:write"}, "view")
	req := func(method, path, body string) (int, string) {
		st, raw := d.callRaw(method, path, rw, body)
		return st, raw
	}
	if st, body := req("PUT", "/api/v1/files/x/y.txt", "data"); st != 200 {
		t.Fatalf("PUT file: %d %s", st, body)
	}
	if st, body := req("GET", "/api/v1/files/x/y.txt", ""); st != 200 || body != "data" {
		t.Fatalf("GET file: %d %s", st, body)
	}
	if st, body := req("GET", "/api/v1/files/x/..%2f..%2fsecrets.key", ""); st != 403 && st != 404 && st != 400 {
		t.Fatalf("GET encoded traversal: %d %s", st, body)
	}
	if st, body := req("GET", "/api/v1/files/escape", ""); st != 403 {
		t.Fatalf("GET through a symlink escape: %d %s", st, body)
	}
}

// callRaw sends a raw body and returns the status and raw answer.
func (d *daemon) callRaw(method, path, token, body string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSystemAPI_Vars_IncrTwoWorkersExact: incr from two workers 10,000
// times each ends at exactly 20,000 (python.replicas: 2).
func TestSystemAPI_Vars_IncrTwoWorkersExact(t *testing.T) {
	d := startSystemAPI(t)
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.run(d.token, "incr", map[string]any{"key": "counter", "n": 10000}, nil)
		}()
	}
	wg.Wait()
	var v struct {
		Value json.Number `json:"value"`
	}
	if st, body := d.call("GET", "/api/v1/vars/counter", d.token, nil, &v); st != 200 || v.Value.String() != "20000" {
		t.Fatalf("counter: %d %s; want exactly 20000", st, body)
	}
	t.Logf("20,000 increments from 2 workers in %s", time.Since(start).Round(time.Millisecond))
}

// TestSystemAPI_Vars_SetSurvivesKill9: a kill -9 of qubiqd right after
// vars.set returned loses nothing.
func TestSystemAPI_Vars_SetSurvivesKill9(t *testing.T) {
	d := startSystemAPI(t)
	for i := range 5 {
		var r string
		d.run(d.token, "setvar", map[string]any{"key": fmt.Sprintf("k%d", i), "value": map[string]any{"i": i}}, &r)
		if r != "SET" {
			t.Fatalf("setvar: %q", r)
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exitErr
	d.cmd = nil
	d.start()
	for i := range 5 {
		var v struct {
			Value map[string]any `json:"value"`
		}
		if st, body := d.call("GET", fmt.Sprintf("/api/v1/vars/k%d", i), d.token, nil, &v); st != 200 || fmt.Sprint(v.Value["i"]) != fmt.Sprint(i) {
			t.Fatalf("k%d after kill -9: %d %s", i, st, body)
		}
	}
}

// TestSystemAPI_HistMessageNested: history recorded from the engine reads
// back raw and as 1 s averages; message.send and runOnGateway run their
// entries with the caller's grant.
func TestSystemAPI_HistMessageNested(t *testing.T) {
	d := startSystemAPI(t)
	time.Sleep(2500 * time.Millisecond) // the ramp records at 10 Hz
	var tr struct {
		Raw, Avg int
		Point    []any
		Known    bool
	}
	d.run(d.token, "trends", map[string]any{"secs": 2}, &tr)
	if !tr.Known || tr.Raw < 5 || tr.Avg < 1 || len(tr.Point) != 3 || tr.Point[2] != "Good" {
		t.Fatalf("trends %+v", tr)
	}
	hist := d.apiKey("hist", []string{"hist:read"}, "view")
	var series []struct {
		Path   string           `json:"path"`
		Points []map[string]any `json:"points"`
	}
	from := time.Now().Add(-10 * time.Second).UTC().Format(time.RFC3339)
	if st, body := d.call("GET", "/api/v1/history?path=Line1/Ramp&start="+from+"&interval_ms=1000&aggregate=max", hist, nil, &series); st != 200 || len(series) != 1 || len(series[0].Points) == 0 {
		t.Fatalf("REST history: %d %s", st, body)
	}
	var got map[string]any
	d.run(d.token, "send", map[string]any{"batch": 7}, &got)
	if fmt.Sprint(got) != "map[got:map[batch:7]]" {
		t.Fatalf("message.send: %v", got)
	}
	var v struct {
		Value map[string]any `json:"value"`
	}
	if st, body := d.call("GET", "/api/v1/vars/last_batch", d.token, nil, &v); st != 200 || fmt.Sprint(v.Value["batch"]) != "7" {
		t.Fatalf("the handler's write: %d %s", st, body)
	}
	var echo []any
	d.run(d.token, "nested", []any{1, "x"}, &echo)
	if fmt.Sprint(echo) != "[1 x]" {
		t.Fatalf("runOnGateway: %v", echo)
	}
	// A sender without vars:write: the handler's vars.set is refused
	// (never more than the caller).
	sender := d.apiKey("sender", []string{"script:execute"}, "operate")
	st, body := d.call("POST", "/api/v1/scripts/api/send/run", sender, map[string]any{"args": 1}, nil)
	if st != 403 || !strings.Contains(string(body), "vars:write") {
		t.Fatalf("send by a grant without vars:write: %d %s; want 403 naming vars:write", st, body)
	}
	if st, body := d.call("POST", "/api/v1/messages/noop", sender, map[string]any{"payload": 5}, nil); st != 200 || !strings.Contains(string(body), `"result":5`) {
		t.Fatalf("REST message: %d %s", st, body)
	}
}

// TestSystemAPI_ScopeMatrix: every system.* method × every scope set
// (script:execute plus one scope), through a script: allowed if and only if
// docs/security.md's scope table says so; and every write level against tags of every
// level.
func TestSystemAPI_ScopeMatrix(t *testing.T) {
	d := startSystemAPI(t)
	d.run(d.token, "setup", map[string]any{"db": "local"}, nil)
	for _, sc := range allScopes {
		t.Run(sc, func(t *testing.T) {
			key := d.apiKey("probe-"+sc, []string{"script:execute", sc}, "design")
			var out map[string]string
			d.run(key, "probe", nil, &out)
			if len(out) != len(methodScope) {
				t.Fatalf("probe covered %d methods; want %d", len(out), len(methodScope))
			}
			for m, need := range methodScope {
				allowed := need == sc || need == "script:execute"
				got := out[m]
				denied := strings.HasPrefix(got, "denied: ")
				if allowed == denied {
					t.Errorf("%s with {script:execute, %s}: %q; want allowed=%v", m, sc, got, allowed)
				}
				if denied && !strings.Contains(got, need) {
					t.Errorf("%s refusal %q does not name %s", m, got, need)
				}
			}
		})
	}
	levels := []string{"view", "operate", "supervise", "design"}
	for li, lv := range levels {
		t.Run("level "+lv, func(t *testing.T) {
			key := d.apiKey("writer-"+lv, []string{"script:execute", "tag:read", "tag:write"}, lv)
			var st []string
			d.run(key, "writes", nil, &st)
			for ti, got := range st {
				want := "Good"
				if ti > li {
					want = "Bad_UserAccessDenied"
				}
				if got != want {
					t.Errorf("level %s writing a %s tag: %s; want %s", lv, levels[ti], got, want)
				}
			}
		})
	}
}
