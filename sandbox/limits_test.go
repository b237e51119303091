package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/sandbox/cgroup"
)

// requireCgroups skips when this machine cannot give workers memory and pids
// cgroups (not root, no writable hierarchy): the limits under test need them.
func requireCgroups(t *testing.T) {
	t.Helper()
	m, err := cgroup.Detect(cgroup.Host{}, cgroup.Options{})
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	mode := m.Mode()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if mode != cgroup.ModeCgroup1 && mode != cgroup.ModeCgroup2 {
		t.Skipf("this machine has no writable memory and pids cgroups (mode %s: %s)", mode, m.Reason())
	}
}

func TestPool_Run_MemoryBomb_OOMKilled(t *testing.T) {
	requireCgroups(t)
	cfg := testConfig(t)
	cfg.MemoryMax = 96 << 20
	cfg.Replicas = 1
	p := startPool(t, cfg, newFakeServices())
	if h := p.Health(); h.Limits.MemoryMax == nil || *h.Limits.MemoryMax != 96<<20 {
		t.Fatalf("health limits %+v", h.Limits)
	}
	load(t, p, "m", "def bomb(args):\n    x = b'x' * (1 << 30)\n    return len(x)\n\ndef ok(args):\n    return len(b'y' * (16 << 20))\n")
	if got := mustRun(t, p, full, "m", "ok", "null"); got != strconv.Itoa(16<<20) {
		t.Fatalf("16 MiB: %s", got)
	}
	_, err := run(t, p, full, "m", "bomb", "null")
	re := runErrOf(t, err)
	if re.Kind != KindMemory || !strings.Contains(re.Detail, "m.bomb") {
		t.Errorf("memory bomb: %+v, want memory_limit_exceeded naming m.bomb", re)
	}
	if got := mustRun(t, p, full, "m", "ok", "null"); got != strconv.Itoa(16<<20) {
		t.Errorf("next run: %s", got)
	}
	if h := p.Health(); h.OOMs != 1 {
		t.Errorf("health ooms %d", h.OOMs)
	}
}

// pids.max counts threads: a script that starts threads without end stops
// at the limit, and its worker (left with threads running) is replaced.
func TestPool_Run_ThreadBomb_StopsAtPidsMax(t *testing.T) {
	requireCgroups(t)
	cfg := testConfig(t)
	cfg.PidsMax = 16
	cfg.Replicas = 1
	p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "threading", "os") })
	load(t, p, "m", `
import threading, os

def bomb(args):
    stop = threading.Event()
    n = 0
    for i in range(200):
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError as e:
            return {"started": n, "error": str(e)}
        n += 1
    return {"started": n}

def pid(args):
    return os.getpid()
`)
	before := mustRun(t, p, full, "m", "pid", "null")
	got := mustRun(t, p, full, "m", "bomb", "null")
	var n int
	fmt.Sscanf(got, `{"started":%d`, &n)
	if !strings.Contains(got, "can't start new thread") || n < 1 || n >= 16 {
		t.Errorf("thread bomb: %s, want refused below pids.max 16", got)
	}
	after := mustRun(t, p, full, "m", "pid", "null")
	if after == before {
		t.Errorf("worker %s kept after leaking threads", after)
	}
}

// The fork bomb meets the audit hook first (os.fork is refused while a
// script runs); the sandbox-exec helper puts the interpreter itself in the
// slot, where a fork loop stops at pids.max.
func TestHelper_JoinsSlot_ForkBombStopsAtPidsMax(t *testing.T) {
	requireCgroups(t)
	cfg := testConfig(t)
	cfg.PidsMax = 8
	p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "os") })
	load(t, p, "m", "import os\ndef f(args):\n    return os.fork()\n")
	if _, err := run(t, p, full, "m", "f", "null"); !strings.Contains(fmt.Sprint(err), "refused by the script sandbox: os.fork") {
		t.Errorf("script fork: %v", err)
	}

	conf, err := p.iso.slot(9)
	if err != nil {
		t.Fatal(err)
	}
	defer conf.killAll()
	prog := `
import os, time
n = 0
for i in range(40):
    try:
        pid = os.fork()
    except OSError as e:
        print("refused", e.errno)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print("forked", n, flush=True)
os.killpg(0, 9)
`
	args := append(append([]string{helperArg}, conf.helperArgs()...), "--", p.python, "-I", "-S", "-c", prog)
	cmd := exec.Command(p.selfExe, args...)
	cmd.Env = childEnv(p.homeDir)
	cmd.SysProcAttr = setpgid()
	out, _ := cmd.CombinedOutput() // killed by its own killpg
	if !strings.Contains(string(out), "refused 11") {
		t.Errorf("output %q, want a fork refused with EAGAIN", out)
	}
	var n int
	if i := strings.Index(string(out), "forked "); i >= 0 {
		fmt.Sscanf(string(out[i:]), "forked %d", &n)
	}
	if n < 1 || n > 7 {
		t.Errorf("forked %d with pids.max 8", n)
	}
	load(t, p, "ok", "def ok(args):\n    return 1\n")
	if got := mustRun(t, p, full, "ok", "ok", "null"); got != "1" {
		t.Errorf("normal script after the bomb: %s", got)
	}
}

// A limit the mode cannot apply fails the worker start; health says why.
func TestPool_Start_LimitNotApplicable_FailsWithReason(t *testing.T) {
	t.Setenv("QUBIQ_SANDBOX_CGROUP_MODE", "rlimit")
	cfg := testConfig(t)
	cfg.PidsMax = 16
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	h := p.Health()
	if h.Mode != "rlimit" || h.Python.Status != "failed" || !strings.Contains(strings.Join(h.Reasons, "; "), "pids_max") {
		t.Errorf("health %+v", h)
	}
	p.SetModule("m", "def f(args):\n    return 1\n", ModuleInfo{Entries: []Entry{{Name: "f"}}}, 1)
	if _, err := p.Run(context.Background(), full, "m", "f", nil); KindOf(err) != KindRuntimeMissing {
		t.Errorf("Run: %v", err)
	}
}

// In rlimit mode memory_max becomes RLIMIT_AS: an allocation past it raises
// MemoryError, reported as memory_limit_exceeded, and the worker is replaced.
func TestPool_Run_RlimitMode_MemoryError(t *testing.T) {
	t.Setenv("QUBIQ_SANDBOX_CGROUP_MODE", "rlimit")
	cfg := testConfig(t)
	cfg.MemoryMax = 64 << 20 // RLIMIT_AS 256 MiB
	cfg.Replicas = 1
	p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "os") })
	if h := p.Health(); h.Mode != "rlimit" {
		t.Fatalf("mode %s", h.Mode)
	}
	load(t, p, "m", "import os\ndef bomb(args):\n    return len(bytearray(1 << 30))\n\ndef pid(args):\n    return os.getpid()\n")
	before := mustRun(t, p, full, "m", "pid", "null")
	_, err := run(t, p, full, "m", "bomb", "null")
	if re := runErrOf(t, err); re.Kind != KindMemory || !strings.Contains(re.Detail, "m.bomb") {
		t.Errorf("%+v", re)
	}
	if after := mustRun(t, p, full, "m", "pid", "null"); after == before {
		t.Errorf("worker kept after MemoryError")
	}
}

func TestPool_Close_RemovesCgroups(t *testing.T) {
	requireCgroups(t)
	cfg := testConfig(t)
	cfg.MemoryMax = 128 << 20
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := p.iso.mgr.Path()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("group %s: %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("group %s left after Close: %v", dir, err)
	}
}
