package sandbox

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The values of each python.hardening key (docs/config.md, "Daemon config"):
// auto applies the layer where the host supports it, on requires it (a
// worker does not start without it, and health says why), off leaves it out.
const (
	HardenAuto = "auto"
	HardenOn   = "on"
	HardenOff  = "off"
)

// Hardening is python.hardening: the optional OS layers the sandbox-exec
// helper applies to each worker before it executes Python (docs/security.md, "The script sandbox"
// §3.6). Each field is "auto" (or ""), "on" or "off".
//
//   - NoNewPrivs: prctl(PR_SET_NO_NEW_PRIVS): no setuid or file-capability
//     gain through execve.
//   - NetNS: a private network namespace with no interface but a downed
//     loopback: a worker cannot reach any address, loopback included.
//   - Landlock: the filesystem is limited to the runtime (read), the
//     interpreter and its ELF interpreter (execute: nothing else can be
//     executed, which closes the _posixsubprocess.fork_exec gap of the audit
//     hook), the worker code and python-packages (read) and a private temp
//     dir (read and write); TCP connect and bind are denied from ABI 4, and
//     abstract UNIX sockets and signals are scoped from ABI 6.
type Hardening struct {
	NoNewPrivs string
	NetNS      string
	Landlock   string
	// Unknown lists keys of python.hardening that are none of the above;
	// Config.Validate refuses them.
	Unknown []string
}

// DefaultHardening is every layer on "auto".
func DefaultHardening() Hardening {
	return Hardening{NoNewPrivs: HardenAuto, NetNS: HardenAuto, Landlock: HardenAuto}
}

// HardeningFrom reads the python.hardening map of the daemon config
// (no_new_privs, netns, landlock; each auto, on or off) as it is: absent
// keys are auto, values are kept verbatim and unknown keys listed, so
// Config.Validate (New) names whatever is wrong.
func HardeningFrom(m map[string]string) Hardening {
	h := DefaultHardening()
	for k, v := range m {
		switch k {
		case "no_new_privs":
			h.NoNewPrivs = v
		case "netns":
			h.NetNS = v
		case "landlock":
			h.Landlock = v
		default:
			h.Unknown = append(h.Unknown, k)
		}
	}
	sort.Strings(h.Unknown)
	return h
}

// ParseHardening is HardeningFrom with its check: the error names every
// unknown key and bad value.
func ParseHardening(m map[string]string) (Hardening, error) {
	h := HardeningFrom(m)
	return h, h.validate()
}

func (h Hardening) validate() error {
	var errs []error
	for _, k := range h.Unknown {
		errs = append(errs, fmt.Errorf("python.hardening: unknown key %q (have no_new_privs, netns, landlock)", k))
	}
	for _, kv := range [][2]string{{"landlock", h.Landlock}, {"netns", h.NetNS}, {"no_new_privs", h.NoNewPrivs}} {
		if !validHardenValue(kv[1]) {
			errs = append(errs, fmt.Errorf("python.hardening.%s: %q, want auto, on or off", kv[0], kv[1]))
		}
	}
	return errors.Join(errs...)
}

func validHardenValue(v string) bool {
	return v == "" || v == HardenAuto || v == HardenOn || v == HardenOff
}

func hardenMode(v string) string {
	if v == "" {
		return HardenAuto
	}
	return v
}

// The states of one hardening layer in Health (HealthHardening).
const (
	StateActive      = "active"
	StateDisabled    = "disabled"
	StateUnavailable = "unavailable"
)

// layer is the decided state of one hardening layer.
type layer struct {
	state  string // StateActive, StateDisabled or StateUnavailable
	reason string // why unavailable (or a note)
}

func (l layer) String() string {
	if l.reason == "" {
		return l.state
	}
	return l.state + ": " + l.reason
}

// hardening is what setupIsolation decided for the pool's workers.
type hardening struct {
	nnp, netns, landlock layer
	landlockABI          int
	fs                   *landlockFS // the rules, when landlock is active
	err                  error       // a layer set "on" that is unavailable: workers do not start
}

// args returns the sandbox-exec options of the active layers.
func (h *hardening) args() []string {
	if h == nil {
		return nil
	}
	var a []string
	if h.nnp.state == StateActive {
		a = append(a, "--nnp")
	}
	if h.netns.state == StateActive {
		a = append(a, "--netns")
	}
	if h.landlock.state == StateActive && h.fs != nil {
		a = append(a, h.fs.args()...)
	}
	return a
}

// probeResult is what `sandbox-exec --probe` prints: an empty string for a
// layer that worked, else its error; the kernel's Landlock ABI (0 without
// Landlock).
type probeResult struct {
	NNP         string `json:"nnp"`
	NetNS       string `json:"netns"`
	Landlock    string `json:"landlock"`
	LandlockABI int    `json:"landlock_abi"`
}

// userNSFor makes a helper whose options ask for a private network
// namespace (--netns) start in a user namespace of its own when the daemon
// is not root, mapping only the daemon's uid and gid to themselves:
// unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN in the user namespace that owns
// the new network namespace (user_namespaces(7), network_namespaces(7)),
// which the helper holds in its own user namespace and nowhere else. The
// interpreter it then executes runs as the same unprivileged uid, so the
// exec leaves it no capability at all (capabilities(7), "Capabilities and
// execution of programs by root"); Landlock forbids it to change its mount
// topology. A root daemon needs none of this and attr is left as is.
func userNSFor(attr *syscall.SysProcAttr, helperArgs []string) {
	if os.Geteuid() == 0 || !slices.Contains(helperArgs, "--netns") {
		return
	}
	userNSAttr(attr, os.Geteuid(), os.Getegid())
}

// userNSAttr is userNSFor's set-up for a child running as uid and gid: a
// new user namespace mapping only them, and CAP_SYS_ADMIN raised as an
// ambient capability so that the helper, exec'd as that unprivileged uid,
// keeps it (in its own user namespace only: the capabilities a child gets
// there are "useless for doing anything" outside it, user_namespaces(7));
// the helper clears its ambient set before it executes the interpreter.
func userNSAttr(attr *syscall.SysProcAttr, uid, gid int) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	attr.AmbientCaps = []uintptr{capSysAdmin}
}

// capSysAdmin is CAP_SYS_ADMIN (capability.h).
const capSysAdmin = 21

// probeHardening runs the helper once with --probe to learn which layers
// this host supports, applying them to a throw-away process. A daemon that
// is not root probes the network namespace inside a user namespace
// (userNSFor); when the host refuses user namespaces, the other layers are
// probed without it and the network namespace is unavailable, saying why.
func (p *Pool) probeHardening(ctx context.Context, want Hardening) (probeResult, error) {
	r, err := p.probeOnce(ctx, want, true)
	if err == nil || os.Geteuid() == 0 || hardenMode(want.NetNS) == HardenOff {
		return r, err
	}
	r, err2 := p.probeOnce(ctx, want, false)
	if err2 != nil {
		return r, err2
	}
	r.NetNS = fmt.Sprintf("the daemon is not root and cannot make a user namespace for it (%v); "+
		"allow unprivileged user namespaces (sysctl user.max_user_namespaces, and systemd's RestrictNamespaces= must allow user and net)", err)
	return r, nil
}

// probeOnce is one --probe run; userNS starts it as userNSFor says.
func (p *Pool) probeOnce(ctx context.Context, want Hardening, userNS bool) (probeResult, error) {
	args := []string{helperArg, "--probe"}
	if hardenMode(want.NoNewPrivs) != HardenOff {
		args = append(args, "--nnp")
	}
	if hardenMode(want.NetNS) != HardenOff && (userNS || os.Geteuid() == 0) {
		args = append(args, "--netns")
	}
	if hardenMode(want.Landlock) != HardenOff {
		args = append(args, "--landlock-probe")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, p.selfExe, args...)
	cmd.Env = childEnv(p.homeDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	userNSFor(cmd.SysProcAttr, args)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return probeResult{}, fmt.Errorf("sandbox-exec --probe: %v: %s", err, strings.TrimSpace(errOut.String()))
	}
	var r probeResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return probeResult{}, fmt.Errorf("sandbox-exec --probe: answer %q: %w", out.String(), err)
	}
	return r, nil
}

// decideHardening turns the config and the probe into the layers the
// workers get. A layer set "on" that the host lacks is an error: workers
// then fail to start, and Health says why (like a limit that cannot be
// applied).
func (p *Pool) decideHardening(ctx context.Context, helper bool) *hardening {
	want := p.cfg.Hardening
	h := &hardening{}
	decide := func(name, mode string, probeErr string, noHelper bool) layer {
		switch {
		case mode == HardenOff:
			return layer{state: StateDisabled}
		case noHelper:
			l := layer{state: StateUnavailable, reason: "the sandbox-exec helper is not available"}
			if mode == HardenOn {
				h.err = errors.Join(h.err, fmt.Errorf("python.hardening.%s is on but %s", name, l.reason))
			}
			return l
		case probeErr != "":
			l := layer{state: StateUnavailable, reason: probeErr}
			if mode == HardenOn {
				h.err = errors.Join(h.err, fmt.Errorf("python.hardening.%s is on but unavailable: %s", name, probeErr))
			}
			return l
		}
		return layer{state: StateActive}
	}
	var pr probeResult
	if helper {
		var err error
		pr, err = p.probeHardening(ctx, want)
		if err != nil {
			msg := err.Error()
			pr = probeResult{NNP: msg, NetNS: msg, Landlock: msg}
		}
	}
	h.nnp = decide("no_new_privs", hardenMode(want.NoNewPrivs), pr.NNP, !helper)
	h.netns = decide("netns", hardenMode(want.NetNS), pr.NetNS, !helper)
	h.landlock = decide("landlock", hardenMode(want.Landlock), pr.Landlock, !helper)
	h.landlockABI = pr.LandlockABI
	if h.landlock.state == StateActive {
		fs, err := p.landlockRules(ctx)
		if err != nil {
			h.landlock = layer{state: StateUnavailable, reason: err.Error()}
			if hardenMode(want.Landlock) == HardenOn {
				h.err = errors.Join(h.err, fmt.Errorf("python.hardening.landlock is on but its rules cannot be made: %w", err))
			}
		} else {
			h.fs = fs
			h.landlock.reason = "ABI " + strconv.Itoa(pr.LandlockABI)
		}
	}
	return h
}

// landlockFS is the filesystem a worker keeps under Landlock.
type landlockFS struct {
	exec []string // files: read and execute (the interpreter, its ELF interpreter)
	ro   []string // directories: read
	roF  []string // files: read
	rw   []string // directories: read and write
}

func (l *landlockFS) args() []string {
	var a []string
	for _, p := range l.exec {
		a = append(a, "--landlock-x", p)
	}
	for _, p := range l.ro {
		a = append(a, "--landlock-ro", p)
	}
	for _, p := range l.roF {
		a = append(a, "--landlock-rof", p)
	}
	for _, p := range l.rw {
		a = append(a, "--landlock-rw", p)
	}
	return append(a, "--landlock")
}

// runtimeLayout is what the interpreter reports about itself: its
// standard library directories and the files it has mapped (shared
// libraries).
type runtimeLayout struct {
	Prefix   string   `json:"prefix"`
	Stdlib   []string `json:"stdlib"`
	Mapped   []string `json:"mapped"`
	Version  string   `json:"version"`
	Platform string   `json:"platform"`
}

// layoutProgram prints the runtime layout as JSON; it imports only what a
// worker imports at start.
const layoutProgram = `import sys, json, sysconfig, math, datetime, itertools, linecache, traceback, ast, struct, string, warnings, importlib, importlib.metadata
paths = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            paths.add(parts[5].strip())
sc = sysconfig.get_paths()
print(json.dumps({"prefix": sys.base_prefix, "stdlib": sorted({sc["stdlib"], sc["platstdlib"]}),
                  "mapped": sorted(paths), "version": sys.version.split()[0],
                  "platform": sysconfig.get_platform()}))`

// runtimeInfo asks the interpreter once for its layout.
func runtimeInfo(ctx context.Context, python, home string) (runtimeLayout, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, python, "-I", "-S", "-c", layoutProgram)
	cmd.Env = childEnv(home)
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return runtimeLayout{}, fmt.Errorf("asking %s for its layout: %v: %s", python, err, tail(errOut.String(), 300))
	}
	var l runtimeLayout
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		return runtimeLayout{}, fmt.Errorf("asking %s for its layout: %w", python, err)
	}
	return l, nil
}

// landlockRules computes the worker's filesystem: execute on the resolved
// interpreter and its ELF interpreter (PT_INTERP) only; read on the
// standard library, the directories of the shared objects the interpreter
// maps, the worker code, the packages' generations, the time zone data,
// /etc/ld.so.cache and /etc/localtime; read and write on the worker's
// private home (its temp dir). Everything else (/proc, /sys, /etc, /home,
// the data dir) is out of reach: a package that reads them at import
// (CPU detection in /sys, say) gets EACCES and must cope, or the site sets
// python.hardening.landlock: off.
func (p *Pool) landlockRules(ctx context.Context) (*landlockFS, error) {
	lay, err := runtimeInfo(ctx, p.python, p.homeDir)
	if err != nil {
		return nil, err
	}
	fs := &landlockFS{exec: []string{p.python}}
	interp, err := elfInterpreter(p.python)
	if err != nil {
		return nil, err
	}
	if interp != "" {
		real, err := filepath.EvalSymlinks(interp)
		if err != nil {
			return nil, fmt.Errorf("ELF interpreter %s: %w", interp, err)
		}
		fs.exec = append(fs.exec, real)
		if real != interp {
			fs.exec = append(fs.exec, interp)
		}
	}
	dirs := map[string]bool{}
	for _, d := range lay.Stdlib {
		if d != "" {
			dirs[d] = true
		}
	}
	for _, m := range lay.Mapped {
		if m == p.python || slices.Contains(fs.exec, m) {
			continue
		}
		dirs[filepath.Dir(m)] = true
	}
	dirs[p.codeDir] = true
	dirs[p.pkgs.Root()] = true
	dirs["/usr/share/zoneinfo"] = true // time zone data (zoneinfo, packages' tz support)
	for d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			fs.ro = append(fs.ro, d)
		}
	}
	sort.Strings(fs.ro)
	for _, f := range []string{"/etc/ld.so.cache", "/etc/localtime"} {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			fs.roF = append(fs.roF, f)
		}
	}
	fs.rw = []string{p.homeDir}
	return fs, nil
}

// elfInterpreter returns the PT_INTERP of the ELF file at path ("" for a
// static binary). Landlock needs execute on it: the kernel opens it with
// exec permission when it starts the interpreter (docs/security.md, "The script sandbox").
func elfInterpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("read ELF %s: %w", path, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read PT_INTERP of %s: %w", path, err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}
