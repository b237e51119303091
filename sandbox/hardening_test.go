package sandbox

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

func TestParseHardening_Values(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    Hardening
		wantErr string
	}{
		{"absent is auto", nil, DefaultHardening(), ""},
		{"each value", map[string]string{"no_new_privs": "on", "netns": "off", "landlock": "auto"},
			Hardening{NoNewPrivs: "on", NetNS: "off", Landlock: "auto"}, ""},
		{"unknown key", map[string]string{"seccomp": "on"}, Hardening{}, `unknown key "seccomp"`},
		{"bad value", map[string]string{"netns": "yes"}, Hardening{}, `python.hardening.netns: "yes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHardening(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// landlockABI is the kernel's Landlock ABI, 0 without Landlock.
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

func TestPool_Health_Hardening_States(t *testing.T) {
	abi := landlockABI()
	tests := []struct {
		name string
		h    Hardening
		want func(h HealthHardening) string // "" when fine
	}{
		{"auto everywhere", DefaultHardening(), func(h HealthHardening) string {
			if h.NoNewPrivs != StateActive {
				return "no_new_privs " + h.NoNewPrivs
			}
			// The tests run as root (CAP_SYS_ADMIN): a netns is always possible.
			if os.Geteuid() == 0 && h.NetNS != StateActive {
				return "netns " + h.NetNS
			}
			if abi >= 1 && (!strings.HasPrefix(h.Landlock, StateActive) || h.LandlockABI != abi) {
				return "landlock " + h.Landlock
			}
			if abi < 1 && !strings.HasPrefix(h.Landlock, StateUnavailable+": ") {
				return "landlock " + h.Landlock
			}
			return ""
		}},
		{"off everywhere", Hardening{NoNewPrivs: HardenOff, NetNS: HardenOff, Landlock: HardenOff}, func(h HealthHardening) string {
			if h.NoNewPrivs != StateDisabled || h.NetNS != StateDisabled || h.Landlock != StateDisabled {
				return "not all disabled"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Replicas = 1
			cfg.Hardening = tt.h
			p := startPool(t, cfg, newFakeServices())
			load(t, p, "m", "def f(args):\n    return args\n")
			if got := mustRun(t, p, full, "m", "f", "7"); got != "7" {
				t.Fatalf("run %s", got)
			}
			if msg := tt.want(p.Health().Hardening); msg != "" {
				t.Errorf("%s: %+v", msg, p.Health().Hardening)
			}
		})
	}
}

// A layer set "on" that the host lacks stops the workers, and health says
// why; here the helper is made unavailable.
func TestPool_Start_HardeningOnUnavailable_FailsWithReason(t *testing.T) {
	cfg := testConfig(t)
	cfg.Hardening.NetNS = HardenOn
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	p.selfExe = "" // no sandbox-exec helper
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	h := p.Health()
	if h.Python.Status != "failed" || !strings.Contains(strings.Join(h.Reasons, "; "), "python.hardening.netns is on") ||
		!strings.HasPrefix(h.Hardening.NetNS, StateUnavailable) {
		t.Errorf("health %+v", h)
	}
}

// helperRun runs a Python program through the sandbox-exec helper with the
// confinement of a worker of p, and returns its output.
func helperRun(t *testing.T, p *Pool, prog string, args ...string) string {
	t.Helper()
	conf, err := p.iso.slot(7)
	if err != nil {
		t.Fatal(err)
	}
	defer conf.killAll()
	argv := append(append([]string{helperArg}, conf.helperArgs()...), "--", p.python, "-I", "-S", "-c", prog)
	cmd := exec.Command(p.selfExe, append(argv, args...)...)
	cmd.Env = childEnv(p.homeDir)
	cmd.Dir = p.homeDir
	cmd.SysProcAttr = setpgid()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper run: %v: %s", err, out)
	}
	return string(out)
}

// loopbackListener accepts connections on 127.0.0.1 until the test ends.
func loopbackListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

const connectProg = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("connected")
except OSError as e:
    print("errno", e.errno)
`

// With a private network namespace a worker cannot reach a loopback
// listener of the host; without it, it can (the control).
func TestHelper_NetNS_LoopbackUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs CAP_SYS_ADMIN (the tests run as root on the test hosts)")
	}
	port := loopbackListener(t)
	tests := []struct {
		netns string
		want  string
	}{
		{HardenOn, "errno " + strconv.Itoa(101)}, // ENETUNREACH: only a downed lo
		{HardenOff, "connected"},
	}
	for _, tt := range tests {
		t.Run("netns="+tt.netns, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Replicas = 1
			cfg.Hardening = Hardening{NoNewPrivs: HardenOn, NetNS: tt.netns, Landlock: HardenOff}
			p := startPool(t, cfg, newFakeServices())
			if got := strings.TrimSpace(helperRun(t, p, connectProg, strconv.Itoa(port))); got != tt.want {
				t.Errorf("connect: %q, want %q", got, tt.want)
			}
		})
	}
}

// A script allowed the socket module (here through a package whose import
// connects, so the audit hook, which refuses socket.connect while a script
// runs, is not what stops it) still cannot reach a loopback listener: the
// worker's network namespace has no usable interface.
func TestPool_Run_NetNS_SocketAllowedCannotConnect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs CAP_SYS_ADMIN (the tests run as root on the test hosts)")
	}
	port := loopbackListener(t)
	for _, netns := range []string{HardenOn, HardenOff} {
		t.Run("netns="+netns, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Replicas = 1
			cfg.Hardening = Hardening{NoNewPrivs: HardenOn, NetNS: netns, Landlock: HardenOff}
			pkgs := filepath.Join(cfg.DataDir, "python-packages")
			if err := os.MkdirAll(pkgs, 0o755); err != nil {
				t.Fatal(err)
			}
			mod := "import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect(('127.0.0.1', " +
				strconv.Itoa(port) + "))\n    RESULT = 'connected'\nexcept OSError as e:\n    RESULT = 'errno %s' % e.errno\n"
			if err := os.WriteFile(filepath.Join(pkgs, "netprobe.py"), []byte(mod), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startPool(t, cfg, newFakeServices(), func(p *Pool) { p.allowed = append(p.allowed, "netprobe", "socket") })
			load(t, p, "m", "import netprobe\ndef f(args):\n    return netprobe.RESULT\n")
			got := mustRun(t, p, full, "m", "f", "null")
			want := `"connected"`
			if netns == HardenOn {
				want = `"errno 101"`
			}
			if got != want {
				t.Errorf("connect from the worker: %s, want %s", got, want)
			}
		})
	}
}

// Landlock: the worker reads only the runtime, its code and packages,
// writes only its home, executes only the interpreter, and cannot connect
// over TCP. _posixsubprocess.fork_exec, which raises no audit event on
// Python 3.11, still forks, but the child cannot execute a shell.
func TestHelper_Landlock_LimitsFilesExecAndNetwork(t *testing.T) {
	if landlockABI() < 1 {
		t.Skip("this kernel has no Landlock (not built in or not enabled at boot)")
	}
	port := loopbackListener(t)
	cfg := testConfig(t)
	cfg.Replicas = 1
	cfg.Hardening = Hardening{NoNewPrivs: HardenOn, NetNS: HardenOff, Landlock: HardenOn}
	p := startPool(t, cfg, newFakeServices())
	outside := filepath.Join(cfg.DataDir, "pwned")
	prog := `
import os, sys, socket, _posixsubprocess
home, outside, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def attempt(name, fn):
    try:
        fn()
        print(name, "ok")
    except OSError as e:
        print(name, "errno", e.errno)
attempt("read-passwd", lambda: open("/etc/passwd").read())
attempt("read-stdlib", lambda: open(os.__file__).read())
attempt("write-home", lambda: open(os.path.join(home, "scratch"), "w").write("x"))
attempt("write-outside", lambda: open(outside, "w").write("x"))
def connect():
    s = socket.socket()
    s.settimeout(3)
    s.connect(("127.0.0.1", port))
attempt("connect", connect)
r, w = os.pipe()
pid = _posixsubprocess.fork_exec([b"/bin/sh", b"-c", b"echo pwned > " + outside.encode()], [b"/bin/sh"],
    True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)
os.close(w)
err = b""
while True:  # the child writes its error in pieces ("OSError:", then "d:"): read to EOF
    chunk = os.read(r, 200)
    if not chunk:
        break
    err += chunk
_, status = os.waitpid(pid, 0)
print("fork_exec", err, os.WEXITSTATUS(status), os.path.exists(outside))
`
	out := helperRun(t, p, prog, p.homeDir, outside, strconv.Itoa(port))
	want := []string{
		"read-passwd errno 13",
		"read-stdlib ok",
		"write-home ok",
		"write-outside errno 13",
		"fork_exec b'OSError:d:' 255 False", // exec failed with EACCES (errno 13 = 0xd), nothing written
	}
	if landlockABI() >= 4 {
		want = append(want, "connect errno 13")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("%s was written", outside)
	}
}

// A bad python.hardening key or value is a config error naming it.
func TestNew_HardeningConfigErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.Hardening = HardeningFrom(map[string]string{"seccomp": "on", "netns": "maybe"})
	_, err := New(cfg, newFakeServices(), nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "seccomp"`) || !strings.Contains(err.Error(), `python.hardening.netns: "maybe"`) {
		t.Errorf("New: %v", err)
	}
}
