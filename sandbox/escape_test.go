package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// matchEscapes are class patterns that read forbidden attributes with the
// interpreter's own getattr (the pen test's match escapes): each is refused
// when saved and, when registered without a check, by the worker before it
// runs.
var matchEscapes = []struct {
	name, code, diag string
}{
	{"class of a tuple", "def main(a):\n    match ():\n        case object(__class__=c):\n            return str(c)\n",
		"forbidden-attribute"},
	{"subclasses walk", "def main(a):\n    match ():\n        case object(__class__=object(__base__=b)):\n" +
		"            match b:\n                case object(__subclasses__=s):\n                    return str(s())\n",
		"forbidden-attribute"},
	{"guard run via getattr", "def main(a):\n    match getattr:\n        case object(__self__=run):\n" +
		"            run.env.audit.active = False\n            return str(run)\n", "forbidden-attribute"},
	{"worker via system", "def main(a):\n    match system.tag.read:\n        case object(__self__=s):\n            return str(s)\n",
		"forbidden-attribute"},
	{"generator frame", "def main(a):\n    g = (i for i in [1])\n    match g:\n        case object(gi_frame=object(f_globals=x)):\n" +
		"            return str(x)\n", "forbidden-attribute"},
	{"code attribute", "def main(a):\n    match main:\n        case object(co_consts=c):\n            return str(c)\n",
		"forbidden-attribute"},
	{"__match_args__ made by type()", "K = type('K', (Exception,), {'__match_args__': ('__traceback__',)})\n" +
		"def main(a):\n    try:\n        raise K()\n    except K as e:\n        match e:\n            case K(tb):\n" +
		"                return str(tb)\n", "forbidden-pattern"},
	{"rebound self-matching name", "int = type('K', (), {'__match_args__': ('__class__',)})\n" +
		"def main(a):\n    match int():\n        case int(c):\n            return str(c)\n", "forbidden-pattern"},
}

func TestPool_Run_MatchClassEscapes_Refused(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1 // the same worker must survive every case
	p := startPool(t, cfg, newFakeServices())
	load(t, p, "ok", "def ok(args):\n    match args:\n        case {'n': int(n)}:\n            return n + 1\n"+
		"        case object(real=r):\n            return r\n    return json.dumps({'a': 1})\n")
	next := func(t *testing.T) {
		t.Helper()
		if got := mustRun(t, p, full, "ok", "ok", `{"n":41}`); got != "42" {
			t.Errorf("next script: %s, want 42", got)
		}
	}
	next(t)
	for i, c := range matchEscapes {
		t.Run(c.name, func(t *testing.T) {
			module := "bad" + strconv.Itoa(i)
			info, err := p.Check(context.Background(), module, c.code)
			re := runErrOf(t, err)
			if re.Kind != KindInvalid {
				t.Errorf("Check: %v, want invalid", err)
			}
			if len(info.Diagnostics) == 0 || info.Diagnostics[0].Code != c.diag {
				t.Errorf("diagnostics %+v, want %s", info.Diagnostics, c.diag)
			}
			// Registered without a check (an older save): the worker
			// refuses it before running anything.
			p.SetModule(module, c.code, ModuleInfo{Entries: []Entry{{Name: "main"}}}, 1)
			r, err := run(t, p, full, module, "main", "null")
			if err == nil {
				t.Fatalf("run: %s, want refused", r.Result)
			}
			if re := runErrOf(t, err); re.Kind != KindInvalid {
				t.Errorf("run: %+v, want invalid", re)
			}
			next(t)
		})
	}
}

// Module data reached through a module view is the run's own copy: item
// assignment in one run (the pen test's ESCAPE_DCT poisoning) changes
// nothing a later run sees in the same worker.
func TestPool_Run_ModuleDataMutation_NotSeenByNextRun(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1 // every run on the same worker
	p := startPool(t, cfg, newFakeServices())
	load(t, p, "a", `
from json.encoder import ESCAPE_DCT
from json import decoder

def attack(args):
    json.encoder.ESCAPE_DCT["\n"] = "<POISON>"
    ESCAPE_DCT["\t"] = "<POISON>"
    decoder.BACKSLASH["n"] = "<POISON>"
    json.encoder.ESCAPE_DCT.clear()
    return "done"
`)
	load(t, p, "b", `
def victim(args):
    return [json.encoder.py_encode_basestring("a\n\t"), json.decoder.py_scanstring('a\\n"', 0)[0],
            len(json.encoder.ESCAPE_DCT)]
`)
	want := mustRun(t, p, full, "b", "victim", "null")
	if want != `["\"a\\n\\t\"","a\n",34]` {
		t.Fatalf("victim before the attack: %s", want)
	}
	if got := mustRun(t, p, full, "a", "attack", "null"); got != `"done"` {
		t.Fatalf("attack: %s", got)
	}
	if got := mustRun(t, p, full, "b", "victim", "null"); got != want {
		t.Errorf("victim after the attack: %s, want %s (module data leaked between runs)", got, want)
	}
}

// With Landlock active, a worker cannot read the daemon's data dir (the
// database, the bootstrap token next to it), even from a package that the
// allow-list lets use open() at import, where the audit hook does not look.
// Without Landlock it can (the control: the test reads what it claims).
func TestPool_Run_Landlock_DataDirUnreadable(t *testing.T) {
	if landlockABI() < 1 {
		t.Skip("this kernel has no Landlock (not built in or not enabled at boot)")
	}
	for _, ll := range []string{HardenOn, HardenOff} {
		t.Run("landlock="+ll, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Replicas = 1
			cfg.Hardening = Hardening{NoNewPrivs: HardenOn, NetNS: HardenOff, Landlock: ll}
			for name, text := range map[string]string{"qubiq.db": "db", "bootstrap-token": "s3cret"} {
				if err := os.WriteFile(filepath.Join(cfg.DataDir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			pkgs := filepath.Join(cfg.DataDir, "python-packages")
			if err := os.MkdirAll(pkgs, 0o755); err != nil {
				t.Fatal(err)
			}
			mod := `import os
def _try(fn):
    try:
        return fn()
    except OSError as e:
        return "errno %s" % e.errno
DATA = ` + strconv.Quote(cfg.DataDir) + `
RESULT = [_try(lambda: open(os.path.join(DATA, "bootstrap-token")).read()),
          _try(lambda: open(os.path.join(DATA, "qubiq.db")).read()),
          _try(lambda: "listed" if os.listdir(DATA) else "empty"),
          _try(lambda: "listed" if os.listdir(os.path.join(DATA, "run", "sandbox")) else "empty")]
`
			if err := os.WriteFile(filepath.Join(pkgs, "fsprobe.py"), []byte(mod), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "fsprobe") })
			if h := p.Health().Hardening; ll == HardenOn && !strings.HasPrefix(h.Landlock, StateActive) {
				t.Fatalf("landlock %q, want active", h.Landlock)
			}
			load(t, p, "m", "import fsprobe\ndef f(args):\n    return fsprobe.RESULT\n")
			got := mustRun(t, p, full, "m", "f", "null")
			want := `["errno 13","errno 13","errno 13","errno 13"]`
			if ll == HardenOff {
				want = `["s3cret","db","listed","listed"]`
			}
			if got != want {
				t.Errorf("data dir from the worker: %s, want %s", got, want)
			}
			load(t, p, "ok", "def ok(args):\n    return json.dumps({'a': 1})\n")
			if got := mustRun(t, p, full, "ok", "ok", "null"); !strings.Contains(got, `\"a\": 1`) {
				t.Errorf("next script: %s", got)
			}
		})
	}
}
