package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/sandbox/packages"
)

// wheelDir holds the wheels the tests build, once per test binary
// (TestMain removes it).
var (
	wheelMu   sync.Mutex
	wheelDir  string
	wheelMemo = map[string]string{}
)

// buildWheel builds a pure-Python wheel of distribution dist (version
// 1.0) holding module mod with code, with `pip wheel --no-deps
// --no-build-isolation` of a project the test writes, and returns its path.
// requires are its install_requires.
func buildWheel(t *testing.T, dist, mod, code string, requires ...string) string {
	t.Helper()
	wheelMu.Lock()
	defer wheelMu.Unlock()
	key := dist + "\x00" + mod + "\x00" + code + "\x00" + strings.Join(requires, ",")
	if p, ok := wheelMemo[key]; ok {
		return p
	}
	if wheelDir == "" {
		d, err := os.MkdirTemp("", "qubiq-test-wheels-")
		if err != nil {
			t.Fatal(err)
		}
		wheelDir = d
	}
	src, err := os.MkdirTemp(wheelDir, "src-")
	if err != nil {
		t.Fatal(err)
	}
	setup := fmt.Sprintf("from setuptools import setup\nsetup(name=%q, version=\"1.0\", py_modules=[%q], install_requires=%s)\n",
		dist, mod, pyList(requires))
	for name, body := range map[string]string{"setup.py": setup, mod + ".py": code} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(wheelDir, "out-"+filepath.Base(src))
	cmd := exec.Command("/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
		"--no-index", "--disable-pip-version-check", "-w", out, src)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + src, "PIP_CONFIG_FILE=/dev/null", "LANG=C.UTF-8"}
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip wheel %s: %v: %s", dist, err, b)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.whl"))
	if len(files) != 1 {
		t.Fatalf("pip wheel %s made %v", dist, files)
	}
	wheelMemo[key] = files[0]
	return files[0]
}

func pyList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// The test package: its distribution name differs from its import name,
// as PyYAML's does from yaml.
const (
	testDist = "qubiq-testpkg"
	testMod  = "qtestpkg"
	testCode = "def double(x):\n    return 2 * x\n"
)

// upload stages wheel files for an install.
func upload(t *testing.T, p *Pool, files ...string) *packages.Upload {
	t.Helper()
	u, err := p.PackageManager().NewUpload()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		err = u.Add(filepath.Base(f), r)
		r.Close()
		if err != nil {
			t.Fatalf("Add(%s): %v", f, err)
		}
	}
	return u
}

// pkgNorm is the PEP 503 normalized form of a distribution name.
func pkgNorm(n string) string { return pkgNameSep.ReplaceAllString(strings.ToLower(n), "-") }

var pkgNameSep = regexp.MustCompile(`[-_.]+`)

func pkgNames(ps []packages.Package) []string {
	var out []string
	for _, p := range ps {
		out = append(out, pkgNorm(p.Name))
	}
	return out
}

const useTestPkg = "import qtestpkg\ndef f(args):\n    return qtestpkg.double(args)\n"

// An uploaded wheel is refused until the widening is acknowledged, then
// installed offline, joins the allow-list by its import name, and a script
// imports it on workers restarted for it; removing it takes it away again.
func TestPool_InstallPackage_UploadThenRemove(t *testing.T) {
	whl := buildWheel(t, testDist, testMod, testCode)
	cfg := testConfig(t)
	p := startPool(t, cfg, newFakeServices())
	before := p.Workers()
	if _, err := p.Check(context.Background(), "m", useTestPkg); KindOf(err) != KindInvalid {
		t.Fatalf("import before the install: %v", err)
	}

	_, err := p.PackageManager().Install(context.Background(), packages.Request{Upload: upload(t, p, whl), By: "admin"}, nil)
	var we *packages.WideningError
	if !errors.As(err, &we) || len(we.Widenings) != 1 || we.Widenings[0].Package != testDist ||
		!we.Widenings[0].Requested || !slices.Contains(we.Widenings[0].Widens, packages.GenericWidening) {
		t.Fatalf("install without acknowledgement: %v", err)
	}
	if pk, _ := p.PackageManager().Packages(); len(pk) != 0 {
		t.Fatalf("refused install left %v", pk)
	}

	var steps []string
	ch, err := p.PackageManager().Install(context.Background(), packages.Request{Upload: upload(t, p, whl), Acknowledge: true, By: "admin"},
		func(pr packages.Progress) { steps = append(steps, pr.Step) })
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	for _, s := range []string{"resolve", "install", "swap", "restart"} {
		if !slices.Contains(steps, s) {
			t.Errorf("progress steps %v lack %q", steps, s)
		}
	}
	if len(ch.Installed) != 1 || ch.Installed[0].Version != "1.0" || !slices.Equal(ch.Installed[0].Imports, []string{testMod}) ||
		!ch.Installed[0].Requested || ch.Installed[0].Source != "upload" || ch.Installed[0].InstalledBy != "admin" {
		t.Errorf("installed %+v", ch.Installed)
	}
	if !slices.Contains(ch.Allowed, testMod) || !slices.Contains(p.Allowed(), testMod) {
		t.Errorf("allow-list %v", ch.Allowed)
	}
	for i, w := range p.Workers() {
		if w.PID == before[i].PID || w.Generation <= before[i].Generation || !w.Live {
			t.Errorf("slot %d not restarted: before %+v, after %+v", i, before[i], w)
		}
	}
	load(t, p, "m", useTestPkg)
	for range 4 { // every worker imports it
		if got := mustRun(t, p, full, "m", "f", "21"); got != "42" {
			t.Fatalf("script using the package: %s", got)
		}
	}
	real, err := filepath.EvalSymlinks(filepath.Join(cfg.DataDir, "python-packages"))
	if err != nil || !strings.HasPrefix(real, filepath.Join(cfg.DataDir, "python-packages.d", "gen-")) {
		t.Errorf("python-packages → %s, %v", real, err)
	}

	if _, err := p.PackageManager().Remove(context.Background(), "qtestpkg", nil); !errors.Is(err, packages.ErrNotInstalled) {
		t.Errorf("remove by import name: %v", err)
	}
	ch, err = p.PackageManager().Remove(context.Background(), "Qubiq_TestPkg", nil)
	if err != nil || len(ch.Installed) != 0 || slices.Contains(ch.Allowed, testMod) {
		t.Fatalf("remove: %+v, %v", ch, err)
	}
	if _, err := p.Check(context.Background(), "m", useTestPkg); KindOf(err) != KindInvalid {
		t.Errorf("import after the removal: %v", err)
	}
	if _, err := p.PackageManager().Remove(context.Background(), testDist, nil); !errors.Is(err, packages.ErrNotInstalled) {
		t.Errorf("second remove: %v", err)
	}
	if whls, _ := filepath.Glob(filepath.Join(cfg.DataDir, "python-packages.d", "wheelhouse", "*.whl")); len(whls) != 0 {
		t.Errorf("wheelhouse keeps %v after the removal", whls)
	}
}

// An upload whose dependency is missing names the missing wheel and
// changes nothing; uploaded together, both install, the dependency widens
// too, and removing the dependency alone is refused only when it was not
// requested.
func TestPool_InstallPackage_UploadMissingDependency(t *testing.T) {
	dep := buildWheel(t, "qubiq-testdep", "qtestdep", "VALUE = 5\n")
	app := buildWheel(t, "qubiq-testapp", "qtestapp", "import qtestdep\ndef value(a):\n    return qtestdep.VALUE + a\n", "qubiq-testdep")
	p := startPool(t, testConfig(t), newFakeServices())
	_, err := p.PackageManager().Install(context.Background(), packages.Request{Upload: upload(t, p, app), Acknowledge: true}, nil)
	if !errors.Is(err, packages.ErrPip) || !strings.Contains(err.Error(), "qubiq-testdep") {
		t.Fatalf("install without the dependency: %v", err)
	}
	_, err = p.PackageManager().Install(context.Background(), packages.Request{Upload: upload(t, p, app, dep)}, nil)
	var we *packages.WideningError
	if !errors.As(err, &we) || len(we.Widenings) != 2 {
		t.Fatalf("widening of app and dependency: %v", err)
	}
	if _, err := p.PackageManager().Install(context.Background(), packages.Request{Upload: upload(t, p, app, dep), Acknowledge: true}, nil); err != nil {
		t.Fatal(err)
	}
	load(t, p, "m", "import qtestapp\ndef f(args):\n    return qtestapp.value(args)\n")
	if got := mustRun(t, p, full, "m", "f", "1"); got != "6" {
		t.Errorf("app: %s", got)
	}
	// The app stays installed without its own manifest entry for the
	// dependency: it comes back as a dependency.
	ch, err := p.PackageManager().Remove(context.Background(), "qubiq-testdep", nil)
	if err != nil || !slices.Equal(pkgNames(ch.Installed), []string{"qubiq-testapp", "qubiq-testdep"}) {
		t.Fatalf("remove the uploaded dependency: %v %v", pkgNames(ch.Installed), err)
	}
	if pk := ch.Installed[1]; pk.Requested {
		t.Errorf("dependency still requested: %+v", pk)
	}
	if _, err := p.PackageManager().Remove(context.Background(), "qubiq-testdep", nil); !errors.Is(err, packages.ErrIsDependency) {
		t.Errorf("remove of a dependency: %v", err)
	}
}

// simpleIndex serves wheels as a PEP 503 simple index at /simple/, and
// pip's own page for the connectivity check.
func simpleIndex(t *testing.T, wheels ...string) *httptest.Server {
	t.Helper()
	files := map[string][]byte{}
	projects := map[string][]string{}
	for _, w := range wheels {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(w)
		files[base] = b
		n := pkgNorm(strings.SplitN(base, "-", 2)[0])
		projects[n] = append(projects[n], base)
	}
	projects["pip"] = nil
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
			if b, ok := files[name]; ok {
				w.Write(b)
				return
			}
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/simple/"); ok {
			if fs, ok := projects[pkgNorm(strings.Trim(name, "/"))]; ok {
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, "<!DOCTYPE html><html><body>\n")
				for _, f := range fs {
					sum := sha256.Sum256(files[f])
					fmt.Fprintf(w, "<a href=\"/files/%s#sha256=%s\">%s</a><br/>\n", f, hex.EncodeToString(sum[:]), f)
				}
				fmt.Fprint(w, "</body></html>\n")
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An install from the index (a loopback PEP 503 index) is refused without
// acknowledgement naming the package, then installed; the wheel stays in
// the wheelhouse so a later removal needs no index.
func TestPool_InstallPackage_FromIndex(t *testing.T) {
	whl := buildWheel(t, testDist, testMod, testCode)
	idx := simpleIndex(t, whl)
	cfg := testConfig(t)
	cfg.IndexURL = idx.URL + "/simple"
	p := startPool(t, cfg, newFakeServices())
	_, err := p.PackageManager().Install(context.Background(), packages.Request{Requirement: "qubiq-testpkg==1.0"}, nil)
	var we *packages.WideningError
	if !errors.As(err, &we) || len(we.Widenings) != 1 || we.Widenings[0].Package != testDist {
		t.Fatalf("install without acknowledgement: %v", err)
	}
	ch, err := p.PackageManager().Install(context.Background(), packages.Request{Requirement: "qubiq-testpkg==1.0", Acknowledge: true, By: "admin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Installed) != 1 || ch.Installed[0].Source != "index" || ch.Installed[0].Requirement != "qubiq-testpkg==1.0" {
		t.Errorf("installed %+v", ch.Installed)
	}
	load(t, p, "m", useTestPkg)
	if got := mustRun(t, p, full, "m", "f", "4"); got != "8" {
		t.Errorf("script: %s", got)
	}
	idx.Close()
	if _, err := p.PackageManager().Remove(context.Background(), testDist, nil); err != nil {
		t.Errorf("remove with the index gone: %v", err)
	}
	if _, err := p.PackageManager().Install(context.Background(), packages.Request{Requirement: "qubiq-testpkg==1.0", Acknowledge: true}, nil); !errors.Is(err, packages.ErrPip) {
		t.Errorf("install with the index gone: %v", err)
	}
}

func TestPool_InstallPackage_Refusals(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	ctx := context.Background()
	tests := []struct {
		name string
		req  packages.Request
		want error
	}{
		{"offline", packages.Request{Requirement: "requests==2.31.0", Acknowledge: true}, packages.ErrOffline},
		{"url", packages.Request{Requirement: "https://example.invalid/x.whl", Acknowledge: true}, packages.ErrBadRequirement},
		{"option", packages.Request{Requirement: "--index-url=http://x y", Acknowledge: true}, packages.ErrBadRequirement},
		{"nothing", packages.Request{Acknowledge: true}, packages.ErrBadRequirement},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.PackageManager().Install(ctx, tt.req, nil); !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
		})
	}
}

func TestUpload_Add_Validation(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	whl := buildWheel(t, testDist, testMod, testCode)
	good, _ := os.ReadFile(whl)
	tests := []struct {
		name, file string
		body       []byte
	}{
		{"not a wheel name", "evil.sh", good},
		{"path traversal is reduced to the base name, which is no wheel", "../../etc/passwd", good},
		{"not a zip", "qubiq_testpkg-1.0-py3-none-any.whl", []byte("PK not really")},
		{"another distribution's contents", "other_pkg-1.0-py3-none-any.whl", good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := p.PackageManager().NewUpload()
			if err != nil {
				t.Fatal(err)
			}
			defer u.Close()
			if err := u.Add(tt.file, strings.NewReader(string(tt.body))); !errors.Is(err, packages.ErrBadWheel) {
				t.Errorf("Add: %v, want packages.ErrBadWheel", err)
			}
			if len(u.Files()) != 0 {
				t.Errorf("kept %v", u.Files())
			}
		})
	}
}

// The connectivity check answers within its bound: yes against an index,
// no with the reason against a closed port, a listener that never answers,
// a wrong path, and no index at all.
func TestPool_CheckIndex(t *testing.T) {
	idx := simpleIndex(t)
	closed, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/simple"
	closed.Close()
	silent, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	tests := []struct {
		name, url  string
		reachable  bool
		reasonPart string
	}{
		{"index", idx.URL + "/simple", true, ""},
		{"index with a trailing slash", idx.URL + "/simple/", true, ""},
		{"wrong path", idx.URL + "/nothing", false, "HTTP 404"},
		{"closed port", closedURL, false, "connection refused"},
		{"never answers", "http://" + silent.Addr().String() + "/simple", false, "no answer"},
		{"offline", "", false, "offline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.IndexURL = tt.url
			p, err := New(cfg, newFakeServices(), testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := p.PackageManager().CheckIndex(context.Background())
			took := time.Since(start)
			if r.Reachable != tt.reachable || !strings.Contains(r.Reason, tt.reasonPart) {
				t.Errorf("%+v, want reachable %v and a reason naming %q", r, tt.reachable, tt.reasonPart)
			}
			if took > packages.IndexCheckTimeout+time.Second {
				t.Errorf("took %v, bound %v", took, packages.IndexCheckTimeout)
			}
			if tt.url != "" && r.DurationMs <= 0 {
				t.Errorf("no duration: %+v", r)
			}
		})
	}
}

// copyRuntime lays out a private runtime as the bundled one is (scripts/ensure-deps.sh):
// Debian's python3.11 executable in DIR/bin, its standard library in
// DIR/lib/python3.11 (hard links where possible), and pip beside it.
func copyRuntime(t *testing.T) string {
	t.Helper()
	exe, err := filepath.EvalSymlinks(testPython())
	if err != nil {
		t.Fatal(err)
	}
	ver := filepath.Base(exe) // python3.11
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(exe, filepath.Join(dir, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "bin", "python3"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("/usr/lib", ver)
	dst := filepath.Join(dir, "lib", ver)
	err = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() && (rel == "test" || rel == "idlelib" || rel == "tkinter" || rel == "ensurepip") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&os.ModeSymlink != 0:
			l, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		}
		if err := os.Link(path, target); err != nil {
			return copyFile(path, target)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copy the standard library: %v", err)
	}
	site := filepath.Join(dir, "lib", "python3", "dist-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/lib/python3/dist-packages/pip", filepath.Join(site, "pip")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "bin", "python3")
}

// Packages live in the data dir: after the runtime is replaced by another
// copy (a firmware upgrade), the installed package still imports.
func TestPool_Packages_SurviveRuntimeReplacement(t *testing.T) {
	whl := buildWheel(t, testDist, testMod, testCode)
	first, second := copyRuntime(t), copyRuntime(t)
	cfg := testConfig(t)
	cfg.Replicas = 1
	cfg.PythonPath = first
	p, err := New(cfg, newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := p.Health(); h.Python.Status != "ok" || h.Python.Path != first {
		t.Fatalf("first runtime: %+v", h.Python)
	}
	if _, err := p.PackageManager().Install(context.Background(), packages.Request{Upload: upload(t, p, whl), Acknowledge: true}, nil); err != nil {
		t.Fatalf("install with the first runtime: %v", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Dir(filepath.Dir(first))) // the old runtime is gone

	cfg.PythonPath = second
	p2 := startPool(t, cfg, newFakeServices())
	if h := p2.Health(); h.Python.Path != second {
		t.Fatalf("second runtime: %+v", h.Python)
	}
	load(t, p2, "m", useTestPkg)
	if got := mustRun(t, p2, full, "m", "f", "5"); got != "10" {
		t.Errorf("package after the runtime swap: %s", got)
	}
	if pk, err := p2.PackageManager().Packages(); err != nil || len(pk) != 1 || !pk[0].Requested {
		t.Errorf("packages %+v, %v", pk, err)
	}
}

// In rlimit mode the number of processes is not limited, and health says
// so rather than pretending (root is not bound by RLIMIT_NPROC).
func TestPool_Health_RlimitMode_PidsUnavailable(t *testing.T) {
	t.Setenv("QUBIQ_SANDBOX_CGROUP_MODE", "rlimit")
	cfg := testConfig(t)
	cfg.MemoryMax = 256 << 20
	p := startPool(t, cfg, newFakeServices())
	h := p.Health()
	if h.Mode != "rlimit" || !strings.HasPrefix(h.Limits.Pids, "unavailable") || h.Limits.PidsMax != nil ||
		!strings.HasPrefix(h.Limits.Memory, "enforced (RLIMIT_AS") || !strings.HasPrefix(h.Limits.CPU, "unavailable") {
		t.Fatalf("limits %+v", h.Limits)
	}
	if os.Geteuid() == 0 && !strings.Contains(h.Limits.Pids, "does not bind root") {
		t.Errorf("pids %q does not say root is not bound", h.Limits.Pids)
	}
	if !slices.ContainsFunc(h.Reasons, func(r string) bool { return strings.HasPrefix(r, "pids: unavailable") }) {
		t.Errorf("reasons %v", h.Reasons)
	}
}

// copyFile copies src to dst (mode 0644).
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
