package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
)

func TestPool_Run_ReturnsArgs(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "echo", "def echo(args):\n    return args\n\ndef none(_):\n    return None\n")
	tests := []struct{ name, args, want string }{
		{"object", `{"rpm":1500,"name":"Pump é","on":true,"list":[1,2.5,null]}`, `{"rpm":1500,"name":"Pump é","on":true,"list":[1,2.5,null]}`},
		{"uint64 exact", `18446744073709551615`, `18446744073709551615`},
		{"int64 min exact", `-9223372036854775808`, `-9223372036854775808`},
		{"null", `null`, `null`},
		{"empty is null", ``, `null`},
		{"string", `"x"`, `"x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustRun(t, p, full, "echo", "echo", tt.args); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
	if got := mustRun(t, p, full, "echo", "none", `1`); got != "null" {
		t.Errorf("None → %s, want null", got)
	}
}

func TestPool_Run_LogsAndDuration(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "m", "def f(args):\n    print('start', args, sep='=')\n    print('done')\n    return 1\n")
	r, err := run(t, p, full, "m", "f", `7`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Log{{Level: "info", Msg: "start=7"}, {Level: "info", Msg: "done"}}
	if fmt.Sprint(r.Logs) != fmt.Sprint(want) {
		t.Errorf("logs %+v, want %+v", r.Logs, want)
	}
	if r.DurationMs <= 0 || r.DurationMs > 10000 {
		t.Errorf("duration %v ms", r.DurationMs)
	}
}

// TestPool_Run_LogsCutAreMarked: a run that prints more than maxLogs lines
// keeps the first maxLogs, then one line that says how many later ones
// were dropped; a run within the limit has no such line. The same holds
// per message of a node run.
func TestPool_Run_LogsCutAreMarked(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "m", "def f(args):\n    for i in range(args):\n        print(i)\n    return 1\n\n"+
		"def transform(msg):\n    for i in range(msg):\n        print(i)\n    return {}\n")
	r, err := run(t, p, full, "m", "f", strconv.Itoa(maxLogs+25))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Logs) != maxLogs+1 || r.Logs[maxLogs-1].Msg != strconv.Itoa(maxLogs-1) {
		t.Fatalf("%d lines kept, last kept %+v; want the first %d and a marker", len(r.Logs), r.Logs[len(r.Logs)-2], maxLogs)
	}
	want := Log{Level: "warning", Msg: "… 25 later lines dropped (limit 1000 lines per run)"}
	if last := r.Logs[maxLogs]; last != want {
		t.Errorf("last line %+v, want %+v", last, want)
	}
	if r, err := run(t, p, full, "m", "f", strconv.Itoa(maxLogs)); err != nil || len(r.Logs) != maxLogs || r.Logs[maxLogs-1].Msg != strconv.Itoa(maxLogs-1) {
		t.Errorf("a run of exactly %d lines: %d lines (%v), want them all and no marker", maxLogs, len(r.Logs), err)
	}
	items, err := p.RunNodes(context.Background(), full, "m", "transform",
		[]json.RawMessage{json.RawMessage(strconv.Itoa(maxLogs + 2)), json.RawMessage("3")}, 30*time.Second)
	if err != nil || len(items) != 2 {
		t.Fatalf("node run: %+v %v", items, err)
	}
	if l := items[0].Logs; len(l) != maxLogs+1 || l[maxLogs].Msg != "… 2 later lines dropped (limit 1000 lines per run)" {
		t.Errorf("first message: %d lines, want %d and a marker", len(l), maxLogs)
	}
	if l := items[1].Logs; len(l) != 3 {
		t.Errorf("second message: %d lines %+v, want its own 3", len(l), l)
	}
}

func TestPool_Run_TagReadWrite(t *testing.T) {
	svc := newFakeServices()
	p := startPool(t, testConfig(t), svc)
	load(t, p, "pumps", `
import system

@gateway(timeout_ms=2000)
def set_speed(args):
    qv = system.tag.read(["Line1/Pump/Speed"])[0]
    if qv.quality != "Good":
        return {"skipped": qv.quality}
    status = system.tag.write(["Line1/Pump/Setpoint"], [args["rpm"]])[0]
    return {"written": status == "Good", "status": status, "value": qv.value, "path": qv.path,
            "utc": qv.timestamp.utcoffset().total_seconds() == 0, "ts": qv.timestamp.isoformat(),
            "unknown": system.tag.read(["Nope"])[0].quality}
`)
	g := auth.Grant{Principal: "op1", Realm: auth.RealmOperator, Scopes: []auth.Scope{auth.TagRead, auth.TagWrite},
		WriteLevel: auth.LevelOperate}
	got := mustRun(t, p, g, "pumps", "set_speed", `{"rpm":1500}`)
	want := `{"written":true,"status":"Good","value":42.5,"path":"Line1/Pump/Speed","utc":true,` +
		`"ts":"2024-05-01T10:00:00.123456+00:00","unknown":"Bad_NodeIdUnknown"}`
	if got != want {
		t.Errorf("result\n%s\nwant\n%s", got, want)
	}
	writes := svc.callsOf("tag.write")
	if len(writes) != 1 || writes[0].Params != `{"paths":["Line1/Pump/Setpoint"],"values":[1500]}` {
		t.Fatalf("tag.write calls %+v", writes)
	}
	if writes[0].Grant.Principal != "op1" || writes[0].Grant.WriteLevel != auth.LevelOperate {
		t.Errorf("services saw grant %+v, want the run's", writes[0].Grant)
	}

	// A write refused by level shows inside the result as a status.
	low := g
	low.WriteLevel = auth.LevelView
	got = mustRun(t, p, low, "pumps", "set_speed", `{"rpm":1}`)
	if !strings.Contains(got, `"status":"Bad_UserAccessDenied"`) {
		t.Errorf("view-level write: %s, want status Bad_UserAccessDenied", got)
	}
}

func TestPool_Run_PermissionDenied_MissingScope(t *testing.T) {
	svc := newFakeServices()
	p := startPool(t, testConfig(t), svc)
	load(t, p, "m", `
def write(args):
    return system.tag.write(["Line1/Pump/Setpoint"], [1])

def caught(args):
    try:
        system.tag.write(["Line1/Pump/Setpoint"], [1])
    except system.PermissionDenied as e:
        return "denied: " + str(e)
    return "written"

def other(args):
    return [system.db.runQuery("DELETE FROM x") for _ in [1]]
`)
	readOnly := auth.Grant{Principal: "kiosk", Realm: auth.RealmAnonymous, Scopes: auth.ReadScopes}
	_, err := run(t, p, readOnly, "m", "write", "null")
	re := runErrOf(t, err)
	if re.Kind != KindPermission || !strings.Contains(re.Detail, `"tag:write"`) || re.Line != 3 {
		t.Errorf("uncaught denial: %+v, want permission_denied naming tag:write at line 3", re)
	}
	got := mustRun(t, p, readOnly, "m", "caught", "null")
	if got != `"denied: missing scope \"tag:write\" for system.tag.write"` {
		t.Errorf("caught denial: %s", got)
	}
	_, err = run(t, p, readOnly, "m", "other", "null")
	if re := runErrOf(t, err); re.Kind != KindPermission || !strings.Contains(re.Detail, "db:write") {
		t.Errorf("db.runQuery: %+v", re)
	}
	if n := len(svc.callsOf("tag.write")) + len(svc.callsOf("db.runQuery")); n != 0 {
		t.Errorf("services were called %d times for refused calls", n)
	}
}

func TestPool_Run_PermissionDenied_FromServices(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "m", "def f(args):\n    try:\n        system.vars.get('k')\n    except system.PermissionDenied as e:\n        return str(e)\n")
	got := mustRun(t, p, full, "m", "f", "null")
	if got != `"write level \"design\" required for vars"` {
		t.Errorf("got %s", got)
	}
}

func TestPool_Run_CallError_FromServices(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "m", "def f(args):\n    try:\n        system.hist.getTrends(['a'], datetime.datetime(2024, 1, 1), None)\n    except system.CallError as e:\n        return str(e)\n")
	if got := mustRun(t, p, full, "m", "f", "null"); got != `"system.hist.getTrends: hist.getTrends: not implemented"` {
		t.Errorf("got %s", got)
	}
}

func TestPool_Run_Timeout_KillsAndReplacesWorker(t *testing.T) {
	cfg := testConfig(t)
	p := startPool(t, cfg, newFakeServices())
	load(t, p, "loop", "@gateway(timeout_ms=200)\ndef spin(args):\n    while True:\n        pass\n\ndef ok(args):\n    return 'fine'\n")
	start := time.Now()
	_, err := run(t, p, full, "loop", "spin", "null")
	re := runErrOf(t, err)
	if re.Kind != KindTimeout {
		t.Fatalf("kind %q (%v), want timeout", re.Kind, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("timed out after %v, want about 200ms", d)
	}
	if got := mustRun(t, p, full, "loop", "ok", "null"); got != `"fine"` {
		t.Errorf("next run: %s", got)
	}
	waitWorkers(t, p, cfg.Replicas)
	if h := p.Health(); h.Timeouts != 1 {
		t.Errorf("health timeouts %d, want 1", h.Timeouts)
	}
}

func TestPool_Run_CallerDeadline_IsTimeout(t *testing.T) {
	svc := newFakeServices()
	p := startPool(t, testConfig(t), svc)
	load(t, p, "m", "def f(args):\n    return system.tag.read(['Block'])\n")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Run(ctx, full, "m", "f", nil)
	if re := runErrOf(t, err); re.Kind != KindTimeout {
		t.Errorf("kind %q, want timeout", re.Kind)
	}
	waitWorkers(t, p, 2)
}

func TestPool_Run_QueueIsFIFOAndBounded(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1
	cfg.Queue = 3
	svc := newFakeServices()
	p := startPool(t, cfg, svc)
	load(t, p, "m", `
def block(args):
    return system.tag.read(["Block"])[0].quality

def mark(args):
    return system.tag.write(["Order"], [args])[0]
`)
	var wg sync.WaitGroup
	results := make(chan error, 10)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := run(t, p, full, "m", "block", "null")
		results <- err
	}()
	<-svc.blocked // the only worker is busy
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := run(t, p, full, "m", "mark", strconv.Itoa(i))
			results <- err
		}()
		deadline := time.Now().Add(5 * time.Second)
		for p.Health().Queued != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("run %d not queued: %+v", i, p.Health())
			}
			time.Sleep(time.Millisecond)
		}
	}
	_, err := run(t, p, full, "m", "mark", "99")
	if re := runErrOf(t, err); re.Kind != KindBusy {
		t.Errorf("run past the queue: %+v, want busy", re)
	}
	close(svc.release)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("queued run: %v", err)
		}
	}
	var order []string
	for _, c := range svc.callsOf("tag.write") {
		order = append(order, c.Params)
	}
	want := []string{`{"paths":["Order"],"values":[0]}`, `{"paths":["Order"],"values":[1]}`, `{"paths":["Order"],"values":[2]}`}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order %v, want FIFO %v", order, want)
	}
}

// Nothing a run does (a module-level global, a patched allowed module) is
// seen by the next one in the same worker: each run has a fresh namespace
// (docs/scripting.md, "What a script may do").
func TestPool_Run_StateIsolation(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1 // every run on the same worker
	p := startPool(t, cfg, newFakeServices())
	load(t, p, "a", `
import json
seen = []

def attack(args):
    out = {}
    def poison(_write_, /):
        json.dumps = lambda *a, **k: "poisoned"
    try:
        poison(None)
        out["poison"] = "changed"
    except Exception as e:
        out["poison"] = str(e)
    try:
        json.dumps = None
        out["direct"] = "changed"
    except Exception as e:
        out["direct"] = str(e)
    try:
        setattr(json, "dumps", None)
        out["setattr"] = "changed"
    except Exception as e:
        out["setattr"] = str(e)
    try:
        math.pi = 3
        out["math"] = "changed"
    except Exception as e:
        out["math"] = str(e)
    try:
        json.JSONEncoder.item_separator = ";"
        out["class"] = "changed"
    except Exception as e:
        out["class"] = str(e)
    try:
        del json.loads
        out["del"] = "changed"
    except Exception as e:
        out["del"] = str(e)
    seen.append(1)
    out["seen"] = len(seen)
    return out

def victim(args):
    seen.append(1)
    return [json.dumps({"a": 1}), json.dumps([1, 2]), math.pi, len(seen)]
`)
	load(t, p, "b", "def b(args):\n    return json.dumps({\"a\": 1})\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, p, full, "a", "attack", "null")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"poison":  "modules are read-only in scripts",
		"direct":  "modules are read-only in scripts",
		"setattr": "modules are read-only in scripts",
		"math":    "modules are read-only in scripts",
		"class":   "cannot change class 'JSONEncoder'",
		"del":     "modules are read-only in scripts",
	}
	for k, w := range want {
		if s, _ := got[k].(string); !strings.Contains(s, w) {
			t.Errorf("%s: %v, want refused (%q)", k, got[k], w)
		}
	}
	if got["seen"] != 1.0 {
		t.Errorf("seen %v", got["seen"])
	}
	if got := mustRun(t, p, full, "b", "b", "null"); got != `"{\"a\": 1}"` {
		t.Errorf("script B: %s, want '{\"a\": 1}'", got)
	}
	if got := mustRun(t, p, full, "a", "victim", "null"); got != `["{\"a\": 1}","[1, 2]",3.141592653589793,1]` {
		t.Errorf("victim: %s (a global or module change leaked)", got)
	}
	if got := mustRun(t, p, full, "a", "attack", "null"); !strings.Contains(got, `"seen":1}`) {
		t.Errorf("second attack saw the first run's global: %s", got)
	}
}

// forbiddenCases are ways out of the guardrail (docs/scripting.md, "What a
// script may do"): "dunder" rows reach object internals through
// underscore, frame or MRO attributes, spelled directly or built as strings
// for getattr; "module" rows reach sys or os through a module an allowed
// module imported (json.codecs.sys) or its loader. Each is refused when saved,
// or at run time with a forbidden-attribute error.
var forbiddenCases = []struct {
	name, body string
	atSave     bool
}{
	{"dunder subclasses walk", "return ().__class__.__base__.__subclasses__()", true},
	{"dunder getattr strings", "return getattr(getattr([], '__class__'), '__base__')", false},
	{"dunder computed getattr", "n = '__cla' + 'ss__'\n    return getattr(1, n)", false},
	{"dunder lying str subclass", "class S(str):\n        def startswith(self, *a):\n            return False\n    return getattr(1, S('__class__'))", false},
	{"dunder generator frame", "g = (i for i in [1]); return g.gi_frame.f_globals", true},
	{"dunder generator frame getattr", "g = (i for i in [1]); return getattr(g, 'gi_frame')", false},
	{"dunder traceback frame getattr", "try:\n        1/0\n    except Exception as e:\n        return getattr(e, '__traceback__')", false},
	{"dunder mro", "return type(1).__mro__", true},
	{"dunder mro method", "return type(1).mro()", true},
	{"module json.codecs", "return json.codecs.sys.modules['os']", false},
	{"module re.enum", "import re\n    return re.enum.sys", false},
	{"module statistics.sys", "import statistics\n    return statistics.sys", false},
	{"module datetime.sys", "return datetime.sys", false},
	{"module math loader", "return math.__loader__.load_module('os')", true},
	{"module from import", "from json import codecs\n    return codecs", false},
	{"module getattr module", "return getattr(json, 'codecs')", false},
	{"format field", "return '{0.__class__}'.format(1)", false},
	{"format str method", "return str.format('{0.__class__}', 1)", false},
	{"format_map", "return '{a.__globals__}'.format_map({'a': len})", false},
	{"format via getattr", "return getattr('{0.__class__}', 'format')(1)", false},
	{"f-string dunder", "return f'{args.__class__}'", true},
}

func TestPool_Run_ForbiddenAttributes(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1 // the same worker must survive every case
	p := startPool(t, cfg, newFakeServices(), func(p *Pool) {
		p.allowed = append(p.allowed, "re", "statistics") // re and statistics import enum and sys: more module rows to refuse
	})
	load(t, p, "ok", "def ok(args):\n    return json.dumps({'a': 1})\n")
	pid := func() string { return mustRun(t, p, full, "ok", "ok", "null") }
	first := pid()
	for i, c := range forbiddenCases {
		t.Run(c.name, func(t *testing.T) {
			module := "bad" + strconv.Itoa(i)
			code := "def f(args):\n    " + c.body + "\n"
			info, err := p.Check(context.Background(), module, code)
			if c.atSave {
				re := runErrOf(t, err)
				if re.Kind != KindInvalid || !strings.Contains(re.Detail, "forbidden attribute") {
					t.Errorf("Check: %v, want invalid naming a forbidden attribute", err)
				}
				if len(info.Diagnostics) == 0 || info.Diagnostics[0].Code != "forbidden-attribute" {
					t.Errorf("diagnostics %+v", info.Diagnostics)
				}
				// The worker refuses it too, when it is not checked first.
				info = ModuleInfo{Entries: []Entry{{Name: "f"}}}
			} else if err != nil {
				t.Fatalf("Check: %v", err)
			}
			p.SetModule(module, code, info, 1)
			_, err = run(t, p, full, module, "f", "null")
			re := runErrOf(t, err)
			if !strings.Contains(re.Detail, "forbidden attribute") {
				t.Errorf("run: %v, want a forbidden-attribute error", err)
			}
			if !c.atSave && re.Kind != KindScriptError {
				t.Errorf("run kind %q, want script_error", re.Kind)
			}
			if got := pid(); got != first {
				t.Errorf("next script: %s, want %s", got, first)
			}
		})
	}
}

// No attribute of an allowed module, as a script sees it, is a module or a
// loader, so no chain of attributes reaches sys or os (json.codecs.sys).
func TestModuleProxy_AllowedModules_NoModuleAttributes(t *testing.T) {
	cfg := testConfig(t)
	p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "re", "statistics") })
	script := `
import sys, types, json, importlib
sys.path.insert(0, sys.argv[1])
import qubiq_guard as g
env = g.Env(["math", "json", "datetime", "re", "statistics"], [], "", [])
run = g.Run(env, object(), None)
bad = []
count = 0
def walk(proxy, name, depth):
    global count
    for attr in dir(proxy):
        v = getattr(proxy, attr)
        count += 1
        if isinstance(v, types.ModuleType) or type(v).__module__ in ("_frozen_importlib", "_frozen_importlib_external"):
            bad.append(name + "." + attr)
        if isinstance(v, g.ModuleProxy) and depth < 3:
            walk(v, name + "." + attr, depth + 1)
for m in ["math", "json", "datetime", "re", "statistics"]:
    walk(run.proxy(importlib.import_module(m), m), m, 0)
print(json.dumps({"bad": bad, "count": count}))
`
	out, err := runPython(t, p, script)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var res struct {
		Bad   []string `json:"bad"`
		Count int      `json:"count"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Bad) != 0 || res.Count < 50 {
		t.Errorf("module attributes %v (of %d enumerated)", res.Bad, res.Count)
	}
}

func TestPool_Run_ImportGate_AtRunTime(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	// Registered without Check: the worker's import gate refuses it.
	code := "def f(args):\n    import os\n    return os.getpid()\n"
	p.SetModule("m", code, ModuleInfo{Entries: []Entry{{Name: "f"}}}, 1)
	_, err := run(t, p, full, "m", "f", "null")
	re := runErrOf(t, err)
	if re.Kind != KindScriptError || !strings.Contains(re.Detail, "module 'os' is not available in scripts") ||
		!strings.Contains(re.Detail, "allowed: datetime, json, math, system") || re.Line != 2 {
		t.Errorf("got %+v", re)
	}
	for _, body := range []string{"from os import path", "import json.decoder as d\n    import subprocess"} {
		p.SetModule("m", "def f(args):\n    "+body+"\n", ModuleInfo{Entries: []Entry{{Name: "f"}}}, 2)
		if _, err := run(t, p, full, "m", "f", "null"); !strings.Contains(fmt.Sprint(err), "not available in scripts") {
			t.Errorf("%q: %v", body, err)
		}
	}
}

func TestPool_Run_RestrictedBuiltins(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	for _, name := range []string{"open", "exec", "eval", "compile", "input", "breakpoint", "globals", "locals", "vars", "help", "memoryview"} {
		t.Run(name, func(t *testing.T) {
			load(t, p, "m", "def f(args):\n    return "+name+"\n")
			_, err := run(t, p, full, "m", "f", "null")
			if !strings.Contains(fmt.Sprint(err), "NameError: name '"+name+"' is not defined") {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
}

// With os allowed on purpose (an administrator widening the allow-list), the
// audit hook still refuses processes, files and network while a script runs.
func TestPool_Run_AuditHook_Backstop(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "os", "socket", "io") })
	tests := []struct{ name, body, want string }{
		{"os.system", "import os\n    return os.system('true')", "os.system"},
		{"os.fork", "import os\n    return os.fork()", "os.fork"},
		{"os.listdir", "import os\n    return os.listdir('/etc')", "os.listdir"},
		{"os.remove", "import os\n    return os.remove('/tmp/x')", "os.remove"},
		{"io.open read", "import io\n    return io.open('/etc/hostname').read()", "open"},
		{"io.open fd 3", "import io\n    return io.open(3, 'wb')", "open"},
		{"socket", "import socket\n    return socket.socket()", "socket"},
		{"os.open write", "import os\n    return os.open('/tmp/qubiq-x', os.O_WRONLY | os.O_CREAT)", "open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load(t, p, "m", "def f(args):\n    "+tt.body+"\n")
			_, err := run(t, p, full, "m", "f", "null")
			if !strings.Contains(fmt.Sprint(err), "refused by the script sandbox: "+tt.want) {
				t.Errorf("%v", err)
			}
		})
	}
}

// The worker's environment is built from nothing: the daemon's NOTIFY_SOCKET,
// WATCHDOG_* and anything else stay out.
func TestPool_Start_ChildEnvIsExplicit(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("QUBIQ_SECRET", "x")
	p := startPool(t, testConfig(t), newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "os") })
	load(t, p, "m", "import os\ndef f(args):\n    return sorted(os.environ.keys())\n")
	got := mustRun(t, p, full, "m", "f", "null")
	want := `["HOME","LANG","LC_ALL","MKL_NUM_THREADS","NUMEXPR_NUM_THREADS","OMP_NUM_THREADS","OPENBLAS_NUM_THREADS","PATH","TMPDIR","VECLIB_MAXIMUM_THREADS"]`
	if got != want {
		t.Errorf("worker env %s, want %s", got, want)
	}
}

// A script that reaches fd 3 (here through an os module an administrator
// allowed) and writes a raw call frame claiming a wider grant gets nothing:
// it cannot name its execution, so the daemon treats the frame as a protocol
// violation, kills the worker and never calls the services.
func TestPool_Run_HostileRawFrame_GetsNothing(t *testing.T) {
	svc := newFakeServices()
	p := startPool(t, testConfig(t), svc, func(p *Pool) { p.allowed = append(p.allowed, "os", "struct") })
	load(t, p, "evil", `
import os, struct, json

def forge(args):
    body = json.dumps({"type": "call", "exec": args, "id": 1, "method": "tag.write",
                       "params": {"paths": ["Line1/Pump/Mode"], "values": [9]},
                       "grant": {"scopes": ["tag:write"], "write_level": "design"},
                       "scopes": ["tag:write"], "principal": "root"}).encode()
    os.write(3, struct.pack(">I", len(body)) + body)
    return os.read(4, 65536).decode("utf-8", "replace")
`)
	readOnly := auth.Grant{Principal: "kiosk", Realm: auth.RealmAnonymous, Scopes: auth.ReadScopes}
	_, err := run(t, p, readOnly, "evil", "forge", `"0000000000000000"`)
	if re := runErrOf(t, err); re.Kind != KindKilled || !strings.Contains(re.Detail, "protocol") {
		t.Errorf("forged frame: %v, want killed for a protocol violation", err)
	}
	if c := svc.callsOf("tag.write"); len(c) != 0 {
		t.Errorf("services got %+v", c)
	}
	waitWorkers(t, p, 2)
	load(t, p, "ok", "def ok(args):\n    return 1\n")
	if got := mustRun(t, p, full, "ok", "ok", "null"); got != "1" {
		t.Errorf("next run %s", got)
	}
}

// Even a frame that names the right execution and claims a grant is served
// with the execution's own grant: the dispatcher reads method and params
// only.
func TestPool_Dispatch_FrameCannotWidenGrant(t *testing.T) {
	svc := newFakeServices()
	p, err := New(testConfig(t), svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	raw := `{"type":"call","exec":"e1","id":7,"method":"tag.write","params":{"paths":["Line1/Pump/Mode"],"values":[9]},` +
		`"grant":{"Principal":"root","Scopes":["tag:write"],"WriteLevel":4},"scopes":["tag:write"],"write_level":"design"}`
	c := decodeCall(t, raw)
	readOnly := auth.Grant{Principal: "kiosk", Realm: auth.RealmAnonymous, Scopes: auth.ReadScopes}
	r := p.dispatch(context.Background(), readOnly, "evil.forge", c)
	if r.OK || r.Error == nil || r.Error.Kind != "permission_denied" || r.Error.Scope != "tag:write" || r.ID != 7 {
		t.Errorf("result %+v %+v", r, r.Error)
	}
	operator := auth.Grant{Principal: "op", Scopes: []auth.Scope{auth.TagWrite}, WriteLevel: auth.LevelOperate}
	r = p.dispatch(context.Background(), operator, "evil.forge", c)
	if !r.OK || string(r.Value) != `["Bad_UserAccessDenied"]` {
		t.Errorf("operator write to a design-level tag: %+v %s", r, r.Value)
	}
	calls := svc.callsOf("tag.write")
	if len(calls) != 1 || calls[0].Grant.Principal != "op" || calls[0].Grant.WriteLevel != auth.LevelOperate {
		t.Errorf("services saw %+v, want the operator's grant", calls)
	}
	for _, m := range []string{"os.system", "tagx.read"} {
		c.Method = m
		if r := p.dispatch(context.Background(), full, "evil.forge", c); r.OK || r.Error.Kind != "permission_denied" {
			t.Errorf("%s: %+v", m, r)
		}
	}
}

func TestPool_Run_ScriptError_LineAndDetail(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "m", "def helper(x):\n    return 1 / x\n\ndef f(args):\n    return helper(args)\n")
	_, err := run(t, p, full, "m", "f", "0")
	re := runErrOf(t, err)
	if re.Kind != KindScriptError || re.Detail != "ZeroDivisionError: division by zero" || re.Line != 2 {
		t.Errorf("got %+v", re)
	}
}

func TestPool_Run_Invalid(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "m", "def f(args):\n    return {1, 2}\n\ndef g(args):\n    return float('nan')\n")
	tests := []struct {
		name, module, entry, args, kind string
	}{
		{"unknown module", "nope", "f", "null", KindNotFound},
		{"unknown entry", "m", "nope", "null", KindInvalid},
		{"bad args", "m", "f", "{", KindInvalid},
		{"set result", "m", "f", "null", ""},
		{"nan result", "m", "g", "null", KindScriptError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := run(t, p, full, tt.module, tt.entry, tt.args)
			if tt.kind == "" {
				if err != nil || string(r.Result) != "[1,2]" {
					t.Errorf("%s %v", r.Result, err)
				}
				return
			}
			if re := runErrOf(t, err); re.Kind != tt.kind {
				t.Errorf("kind %q (%v), want %q", re.Kind, err, tt.kind)
			}
		})
	}
}

func TestPool_Run_RecycleAfterRuns(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1
	cfg.RecycleAfterRuns = 2
	p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "os") })
	load(t, p, "m", "import os\ndef f(args):\n    return os.getpid()\n")
	a := mustRun(t, p, full, "m", "f", "null")
	b := mustRun(t, p, full, "m", "f", "null")
	c := mustRun(t, p, full, "m", "f", "null")
	if a != b || b == c {
		t.Errorf("pids %s %s %s: want the worker replaced after 2 runs", a, b, c)
	}
}

func TestPool_Start_Degraded_MissingInterpreter(t *testing.T) {
	cfg := testConfig(t)
	cfg.PythonPath = filepath.Join(t.TempDir(), "no", "python3")
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v, want nil (degraded)", err)
	}
	defer p.Close(context.Background())
	h := p.Health()
	if h.Python.Status != "missing" || !strings.Contains(h.Python.Reason, cfg.PythonPath) || h.Workers != 0 {
		t.Errorf("health %+v", h)
	}
	p.SetModule("m", "def f(args):\n    return 1\n", ModuleInfo{Entries: []Entry{{Name: "f"}}}, 1)
	_, err = p.Run(context.Background(), full, "m", "f", nil)
	if re := runErrOf(t, err); re.Kind != KindRuntimeMissing || !strings.Contains(re.Detail, "the Python runtime is missing: reinstall") {
		t.Errorf("Run: %+v", re)
	}
	_, err = p.Check(context.Background(), "m", "def f(args):\n    return 1\n")
	if re := runErrOf(t, err); re.Kind != KindRuntimeMissing {
		t.Errorf("Check: %+v", re)
	}
}

func TestPool_Start_Degraded_HandshakeFails(t *testing.T) {
	cfg := testConfig(t)
	// An interpreter that is not Python: it exits at once.
	cfg.PythonPath = "/bin/true"
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Close(context.Background())
	if h := p.Health(); h.Python.Status != "failed" || !strings.Contains(h.Python.Reason, "handshake") {
		t.Errorf("health %+v", h.Python)
	}
	p.SetModule("m", "", ModuleInfo{Entries: []Entry{{Name: "f"}}}, 1)
	if _, err := p.Run(context.Background(), full, "m", "f", nil); KindOf(err) != KindRuntimeMissing {
		t.Errorf("Run: %v", err)
	}
}

func TestResolvePython_ScriptShim(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "python")
	if err := os.Symlink(shim, link); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, shim, "/usr/bin/python3"} {
		got, err := resolvePython(context.Background(), p)
		if err != nil || got != want {
			t.Errorf("resolvePython(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := resolvePython(context.Background(), filepath.Join(dir, "none")); err == nil {
		t.Error("a missing interpreter resolved")
	}
}

func TestPool_Health_JSON(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	b, err := json.Marshal(p.Health())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mode", "limits", "hardening", "python", "linter", "workers", "busy", "queued", "timeouts", "ooms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("health JSON has no %q: %s", k, b)
		}
	}
	py := m["python"].(map[string]any)
	if py["status"] != "ok" || py["version"] == "" || py["path"] == "" {
		t.Errorf("python %v", py)
	}
	if l := m["limits"].(map[string]any); l["memory_max"] != nil || l["pids_max"] != nil || l["cpu_max"] != nil {
		t.Errorf("unset limits must be null: %v", l)
	}
	switch m["mode"] {
	case "cgroup2", "cgroup1", "rlimit", "none":
	default:
		t.Errorf("mode %v", m["mode"])
	}
	if m["workers"].(float64) != 2 {
		t.Errorf("workers %v", m["workers"])
	}
}

func TestPool_Close_StopsWorkers(t *testing.T) {
	cfg := testConfig(t)
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.SetModule("m", "def f(args):\n    return 1\n", ModuleInfo{Entries: []Entry{{Name: "f"}}}, 1)
	if _, err := p.Run(context.Background(), full, "m", "f", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), full, "m", "f", nil); KindOf(err) != KindKilled {
		t.Errorf("Run after Close: %v", err)
	}
	if h := p.Health(); h.Workers != 0 {
		t.Errorf("workers after Close: %d", h.Workers)
	}
}

func TestPool_RunNode_UsesNodeTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.NodeTimeout = 300 * time.Millisecond
	p := startPool(t, cfg, newFakeServices())
	load(t, p, "flow1", "def transform(msg):\n    if msg == 'spin':\n        while True:\n            pass\n    return {'payload': msg}\n")
	r, err := p.RunNode(context.Background(), full, "flow1", "transform", json.RawMessage(`"x"`))
	if err != nil || string(r.Result) != `{"payload":"x"}` {
		t.Fatalf("%s %v", r.Result, err)
	}
	start := time.Now()
	_, err = p.RunNode(context.Background(), full, "flow1", "transform", json.RawMessage(`"spin"`))
	if KindOf(err) != KindTimeout || time.Since(start) > 3*time.Second {
		t.Errorf("node spin: %v after %v, want timeout at the node timeout", err, time.Since(start))
	}
}

func TestPool_Worker_KilledFromOutside_Replaced(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1
	svc := newFakeServices()
	p := startPool(t, cfg, svc, func(p *Pool) { p.allowed = append(p.allowed, "os") })
	load(t, p, "m", "import os\ndef pid(args):\n    return os.getpid()\n\ndef block(args):\n    return system.tag.read(['Block'])\n")
	pid, _ := strconv.Atoi(mustRun(t, p, full, "m", "pid", "null"))

	// While idle: the slot notices and starts another.
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, p, 0)
	waitWorkers(t, p, 1)
	pid2, _ := strconv.Atoi(mustRun(t, p, full, "m", "pid", "null"))
	if pid2 == pid {
		t.Fatalf("same worker %d after it was killed", pid)
	}

	// During a run: the run fails with kind killed (no OOM counted).
	errc := make(chan error, 1)
	go func() {
		_, err := run(t, p, full, "m", "block", "null")
		errc <- err
	}()
	<-svc.blocked
	if err := syscallKill(pid2); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if kind := KindOf(err); kind != KindKilled && !(kind == KindMemory && p.Health().Mode != "cgroup1" && p.Health().Mode != "cgroup2") {
		t.Errorf("run whose worker was killed: %v", err)
	}
	if got := mustRun(t, p, full, "m", "pid", "null"); got == strconv.Itoa(pid2) {
		t.Errorf("worker not replaced")
	}
}

func TestPool_Run_RecycleAboveMemory(t *testing.T) {
	for _, tt := range []struct {
		name      string
		threshold int64
		recycled  bool
	}{
		{"below the worker's resident memory", 1 << 20, true},
		{"well above it", 1 << 30, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Replicas = 1
			cfg.RecycleAfterRuns = 0
			cfg.RecycleAboveMemory = tt.threshold
			p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "os") })
			load(t, p, "m", "import os\ndef pid(args):\n    return os.getpid()\n")
			a := mustRun(t, p, full, "m", "pid", "null")
			b := mustRun(t, p, full, "m", "pid", "null")
			if (a != b) != tt.recycled {
				t.Errorf("pids %s then %s; want recycled=%v", a, b, tt.recycled)
			}
		})
	}
}

// badJSONServices answers every call with bytes that are not JSON.
type badJSONServices struct{}

func (badJSONServices) Call(context.Context, auth.Grant, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`[1,2`), nil
}

func TestPool_Run_MalformedServiceAnswer_IsCallError(t *testing.T) {
	p := startPool(t, testConfig(t), badJSONServices{})
	load(t, p, "m", "def f(args):\n    try:\n        system.tag.read(['A'])\n    except system.CallError as e:\n        return 'call error'\n    return 'no error'\n")
	for range 2 { // the stream stays in step
		if got := mustRun(t, p, full, "m", "f", "null"); got != `"call error"` {
			t.Errorf("got %s", got)
		}
	}
}

// TestPool_Run_QueueWaitBoundedByTimeout: a run that cannot get a worker
// within its own timeout answers busy (retry later) instead of holding its
// caller for as long as the workers stay busy.
func TestPool_Run_QueueWaitBoundedByTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1
	svc := newFakeServices()
	p := startPool(t, cfg, svc)
	load(t, p, "m", `
def block(args):
    return system.tag.read(["Block"])[0].quality

@gateway(timeout_ms=200)
def quick(args):
    return 1
`)
	done := make(chan error, 1)
	go func() {
		_, err := run(t, p, full, "m", "block", "null")
		done <- err
	}()
	<-svc.blocked // the only worker is busy
	start := time.Now()
	_, err := run(t, p, full, "m", "quick", "null")
	if re := runErrOf(t, err); re.Kind != KindBusy || !strings.Contains(re.Detail, "waited 200ms") {
		t.Fatalf("queued past its timeout: %+v, want busy naming the wait", re)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("caller held %s", el)
	}
	close(svc.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, p, full, "m", "quick", "null"); err != nil {
		t.Fatalf("next run: %v", err)
	}
}
