//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// The issue-3 proofs against the built qubiqd (cgroup v1, root, no
// systemd on the test hosts): the memory bomb, the fork (task) bomb and the
// CPU spin are stopped by the OS limits while the daemon and its scan loop
// carry on; a degraded boot without a runtime; lint and packages over REST
// and qubiqctl.

const sandboxProject = `
devices:
  - {name: sim, driver: sim}
tags:
  - {path: Sim/Ramp, device: sim, address: "ramp(0,100,10s)", type: float64, scan: 100ms}
`

// sandboxScan is the scan period of Sim/Ramp.
const sandboxScan = 100 * time.Millisecond

// newSandboxDaemon writes qubiq.yaml with the python section given and
// sandboxProject; prepare, when not nil, may fill the data dir before the
// start.
func newSandboxDaemon(t *testing.T, python string, prepare func(dataDir string), extraEnv ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	port := peers.FreePort(t)
	cfg := fmt.Sprintf("appliance_id: it-sbx\ndata_dir: data\nproject: project.yaml\nhttp: {listen: \"127.0.0.1:%d\"}\n"+
		"python: %s\nstore: {open_timeout: 2s}\n", port, python)
	for name, body := range map[string]string{"qubiq.yaml": cfg, "project.yaml": sandboxProject} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		prepare(data)
	}
	env := append([]string{"PYTHON_PATH=" + pythonPath(t)}, extraEnv...)
	d := &daemon{t: t, dir: dir, cfg: filepath.Join(dir, "qubiq.yaml"), url: fmt.Sprintf("http://127.0.0.1:%d", port),
		env: env, log: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("qubiqd log:\n%s", d.logs())
		}
	})
	return d
}

// problemKind returns the "kind" of a problem body.
func problemKind(body []byte) string {
	var p struct {
		Kind string `json:"kind"`
	}
	json.Unmarshal(body, &p)
	return p.Kind
}

// scanWatch samples Sim/Ramp's timestamp every 20 ms and counts the
// distinct ones: each is one completed scan.
type scanWatch struct {
	mu    sync.Mutex
	seen  map[string]bool
	start time.Time
	stop  chan struct{}
	done  chan struct{}
}

func watchScans(t *testing.T, d *daemon, token string) *scanWatch {
	w := &scanWatch{seen: map[string]bool{}, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		client := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest("POST", d.url+"/api/v1/tags/read", strings.NewReader(`{"paths":["Sim/Ramp"]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			var vals []struct {
				Quality   string `json:"quality"`
				Timestamp string `json:"timestamp"`
			}
			json.NewDecoder(resp.Body).Decode(&vals)
			resp.Body.Close()
			if len(vals) == 1 && vals[0].Quality == "Good" {
				w.mu.Lock()
				w.seen[vals[0].Timestamp] = true
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// end stops the watch and returns the scans seen and the scans a 100 ms
// scan class should have completed in the window.
func (w *scanWatch) end() (seen, want int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen), int(time.Since(w.start) / sandboxScan)
}

// qbombPackage is an installed package (a hand-made dist-info, as pip
// leaves it) whose function starts threads without end: pids.max counts
// threads, so it is the fork bomb a script can reach (os.fork itself is
// refused by the audit hook while a script runs).
func qbombPackage(data string) error {
	pkgs := filepath.Join(data, "python-packages")
	files := map[string]string{
		"qbomb.py": `import threading

def tasks(n):
    ev = threading.Event()
    started = 0
    try:
        for _ in range(n):
            threading.Thread(target=ev.wait, daemon=True).start()
            started += 1
    except RuntimeError as e:
        return {"started": started, "error": str(e)}
    return {"started": started}
`,
		"qbomb-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: qbomb\nVersion: 1.0\n",
		"qbomb-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"qbomb-1.0.dist-info/top_level.txt": "qbomb\n",
		"qbomb-1.0.dist-info/RECORD":        "qbomb.py,,\n",
	}
	for name, body := range files {
		p := filepath.Join(pkgs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

const bombsScript = `
import qbomb

def bomb_memory(args):
    x = b"x" * (1 << 30)
    return len(x)

def bomb_tasks(args):
    return qbomb.tasks(500)

@gateway(timeout_ms=300)
def spin(args):
    while True:
        pass

def ok(args):
    return {"ok": args}
`

// A memory bomb is killed by memory_max and reported as OOM, a task bomb
// stops at pids_max, a CPU spin is killed at its timeout; after each a
// normal script runs, the daemon never restarted, and the simulator's scan
// loop kept its rate.
func TestSandbox_BombsContained(t *testing.T) {
	d := newSandboxDaemon(t, "{replicas: 2, memory_max: 128MiB, pids_max: 32, gateway_timeout: {default: 5s, min: 10ms, max: 1m}}",
		func(data string) {
			if err := qbombPackage(data); err != nil {
				t.Fatal(err)
			}
		})
	d.start()
	pid := d.cmd.Process.Pid
	var h struct {
		UptimeS int64 `json:"uptime_s"`
		Sandbox struct {
			Mode   string `json:"mode"`
			Limits struct {
				MemoryMax *int64 `json:"memory_max"`
				PidsMax   *int   `json:"pids_max"`
				Pids      string `json:"pids"`
			} `json:"limits"`
			Hardening map[string]any `json:"hardening"`
			Python    struct {
				Status string `json:"status"`
			} `json:"python"`
		} `json:"sandbox"`
	}
	if st, body := d.call("GET", "/api/v1/health", "", nil, &h); st != 200 || h.Sandbox.Python.Status != "ok" {
		t.Fatalf("health: %d %s", st, body)
	}
	if h.Sandbox.Mode != "cgroup1" && h.Sandbox.Mode != "cgroup2" {
		t.Fatalf("this host gives no writable memory and pids cgroups (mode %s): the limits under test need them", h.Sandbox.Mode)
	}
	if h.Sandbox.Limits.PidsMax == nil || *h.Sandbox.Limits.PidsMax != 32 || !strings.HasPrefix(h.Sandbox.Limits.Pids, "enforced") {
		t.Fatalf("limits %+v", h.Sandbox.Limits)
	}
	if st, body := d.call("PUT", "/api/v1/scripts/bombs", d.token, map[string]any{"code": bombsScript}, nil); st != 200 {
		t.Fatalf("save: %d %s", st, body)
	}
	runner := d.apiKey("runner", []string{"tag:read", "script:execute"}, "operate")
	waitFor(t, 10*time.Second, "Sim/Ramp Good", func() (bool, string) {
		v := d.read(runner, "Sim/Ramp")["Sim/Ramp"]
		return v.Quality == "Good", fmt.Sprint(v)
	})
	watch := watchScans(t, d, runner)

	normal := func(after string) {
		t.Helper()
		var out struct {
			Result map[string]any `json:"result"`
		}
		st, body := d.call("POST", "/api/v1/scripts/bombs/ok/run", runner, map[string]any{"args": after}, &out)
		if st != 200 || out.Result["ok"] != after {
			t.Fatalf("normal script after the %s: %d %s", after, st, body)
		}
	}

	st, body := d.call("POST", "/api/v1/scripts/bombs/bomb_memory/run", runner, map[string]any{"args": nil}, nil)
	if st != 500 || problemKind(body) != "memory_limit_exceeded" || !strings.Contains(string(body), "bombs.bomb_memory") {
		t.Errorf("memory bomb: %d %s, want 500 memory_limit_exceeded naming the script", st, body)
	}
	normal("memory bomb")

	var tasks struct {
		Result struct {
			Started int    `json:"started"`
			Error   string `json:"error"`
		} `json:"result"`
	}
	st, body = d.call("POST", "/api/v1/scripts/bombs/bomb_tasks/run", runner, map[string]any{"args": nil}, &tasks)
	if st != 200 || tasks.Result.Error == "" || tasks.Result.Started < 1 || tasks.Result.Started >= 32 {
		t.Errorf("task bomb: %d %s, want it stopped below pids_max 32", st, body)
	}
	normal("task bomb")

	start := time.Now()
	st, body = d.call("POST", "/api/v1/scripts/bombs/spin/run", runner, map[string]any{"args": nil}, nil)
	if st != 504 || problemKind(body) != "timeout" || time.Since(start) > 5*time.Second {
		t.Errorf("CPU spin: %d %s after %v, want 504 timeout at 300 ms", st, body, time.Since(start))
	}
	normal("CPU spin")

	time.Sleep(time.Second) // a window where the scan rate is measured after the last bomb too
	seen, want := watch.end()
	t.Logf("scan loop: %d scans seen of %d expected at %v during the bombs", seen, want, sandboxScan)
	if seen < want*6/10 {
		t.Errorf("scan loop fell behind: %d scans of %d expected (%d missed)", seen, want, want-seen)
	}
	if d.cmd == nil || d.cmd.Process.Pid != pid {
		t.Fatal("qubiqd restarted")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("qubiqd %d gone: %v", pid, err)
	}
	var h2 struct {
		UptimeS int64 `json:"uptime_s"`
		Sandbox struct {
			Python struct {
				Status string `json:"status"`
			} `json:"python"`
		} `json:"sandbox"`
	}
	if st, _ := d.call("GET", "/api/v1/health", "", nil, &h2); st != 200 || h2.UptimeS < h.UptimeS || h2.Sandbox.Python.Status != "ok" {
		t.Errorf("health after the bombs: %d %+v", st, h2)
	}
}

// With PYTHON_PATH pointing nowhere qubiqd boots degraded: health says why,
// scripts fail with runtime_missing (503), tags still read.
func TestSandbox_DegradedBoot_RuntimeMissing(t *testing.T) {
	d := newSandboxDaemon(t, "{replicas: 2}", nil, "PYTHON_PATH=/nonexistent/python3")
	d.start()
	var h struct {
		Status  string   `json:"status"`
		Reasons []string `json:"reasons"`
		Sandbox struct {
			Python struct {
				Status string `json:"status"`
			} `json:"python"`
		} `json:"sandbox"`
	}
	if st, body := d.call("GET", "/api/v1/health", "", nil, &h); st != 200 || h.Status != "degraded" ||
		h.Sandbox.Python.Status != "missing" || !strings.Contains(strings.Join(h.Reasons, " "), "/nonexistent/python3") {
		t.Fatalf("health: %d %s", st, body)
	}
	st, body := d.call("PUT", "/api/v1/scripts/m", d.token, map[string]any{"code": "def f(args):\n    return 1\n"}, nil)
	if st != 503 || problemKind(body) != "runtime_missing" {
		t.Errorf("save without a runtime: %d %s", st, body)
	}
	st, body = d.call("POST", "/api/v1/scripts/m/f/run", d.token, map[string]any{"args": nil}, nil)
	if st != 503 || problemKind(body) != "runtime_missing" {
		t.Errorf("run without a runtime: %d %s", st, body)
	}
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	waitFor(t, 10*time.Second, "tags still read Good", func() (bool, string) {
		v := d.read(reader, "Sim/Ramp")["Sim/Ramp"]
		return v.Quality == "Good", fmt.Sprint(v)
	})
}

// buildTestWheel builds a small pure-Python wheel with Debian's pip.
func buildTestWheel(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	files := map[string]string{
		"setup.py":  "from setuptools import setup\nsetup(name=\"qubiq-itpkg\", version=\"1.0\", py_modules=[\"qitpkg\"])\n",
		"qitpkg.py": "def triple(x):\n    return 3 * x\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(src, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
		"--disable-pip-version-check", "-w", out, src)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + src, "PIP_CONFIG_FILE=/dev/null", "LANG=C.UTF-8"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip wheel: %v: %s", err, b)
	}
	files2, _ := filepath.Glob(filepath.Join(out, "*.whl"))
	if len(files2) != 1 {
		t.Fatalf("pip wheel made %v", files2)
	}
	return files2[0]
}

// The air-gapped route end to end: upload refused until acknowledged
// (409 naming the package), then installed over REST, imported by a
// script, listed and removed with qubiqctl; the sandbox routes need
// sandbox_admin; lint answers with its linter.
func TestSandbox_PackagesAndLint(t *testing.T) {
	whl := buildTestWheel(t)
	d := newSandboxDaemon(t, "{replicas: 2}", nil)
	d.start()
	designer := d.apiKey("designer", nil, "view", "designer")
	admin := d.apiKey("sbx", nil, "view", "sandbox_admin")
	runner := d.apiKey("runner", []string{"script:execute"}, "operate")

	if st, body := d.call("GET", "/api/v1/sandbox/packages", designer, nil, nil); st != 403 || !strings.Contains(string(body), "sandbox_admin") {
		t.Errorf("packages as a designer: %d %s", st, body)
	}
	upload := func(ack bool) (int, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("wheel", filepath.Base(whl))
		b, _ := os.ReadFile(whl)
		fw.Write(b)
		if ack {
			mw.WriteField("acknowledge_widening", "true")
		}
		mw.Close()
		req, _ := http.NewRequest("POST", d.url+"/api/v1/sandbox/packages/upload", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		return resp.StatusCode, out.Bytes()
	}
	if st, body := upload(false); st != 409 || !strings.Contains(string(body), `"package":"qubiq-itpkg"`) {
		t.Fatalf("upload without acknowledgement: %d %s", st, body)
	}
	st, body := upload(true)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if st != 200 || !strings.Contains(lines[len(lines)-1], `"event":"done"`) || !strings.Contains(lines[len(lines)-1], `"qitpkg"`) {
		t.Fatalf("upload: %d %s", st, body)
	}
	code := "import qitpkg\ndef f(args):\n    return qitpkg.triple(args)\n"
	if st, body := d.call("PUT", "/api/v1/scripts/usepkg", d.token, map[string]any{"code": code}, nil); st != 200 {
		t.Fatalf("save a script importing the package: %d %s", st, body)
	}
	var out struct {
		Result json.Number `json:"result"`
	}
	if st, body := d.call("POST", "/api/v1/scripts/usepkg/f/run", runner, map[string]any{"args": 14}, &out); st != 200 || out.Result.String() != "42" {
		t.Fatalf("run: %d %s", st, body)
	}

	ctl := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(bins(t), "qubiqctl"), args...)
		cmd.Env = append(os.Environ(), "QUBIQ_URL="+d.url, "QUBIQ_API_KEY="+admin)
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(b), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}
	if out, code := ctl("packages", "list"); code != 0 || !strings.Contains(out, "qubiq-itpkg") || !strings.Contains(out, "qitpkg") {
		t.Errorf("packages list: %d %s", code, out)
	}
	if out, code := ctl("packages", "check"); code != 1 || !strings.Contains(out, "offline") {
		t.Errorf("packages check without an index: %d %s", code, out)
	}
	if out, code := ctl("packages", "remove", "qubiq-itpkg"); code != 0 || !strings.Contains(out, "remove qubiq-itpkg done") {
		t.Errorf("packages remove: %d %s", code, out)
	}
	if st, body := d.call("POST", "/api/v1/scripts/usepkg/f/run", runner, map[string]any{"args": 14}, nil); st == 200 {
		t.Errorf("the package still imports after its removal: %s", body)
	}

	var lint struct {
		Linter      string `json:"linter"`
		Diagnostics []struct {
			Line     int    `json:"line"`
			Code     string `json:"code"`
			Severity string `json:"severity"`
		} `json:"diagnostics"`
	}
	if st, body := d.call("POST", "/api/v1/scripts/lint", designer, map[string]any{"code": "def f(args):\n    return 1\nreturn 2\n"}, &lint); st != 200 ||
		lint.Linter != "syntax-only" || len(lint.Diagnostics) != 1 || lint.Diagnostics[0].Code != "syntax-error" || lint.Diagnostics[0].Line != 3 {
		t.Errorf("lint: %d %s", st, body)
	}
	st, body = d.call("PUT", "/api/v1/scripts/broken", d.token, map[string]any{"code": "def f(args):\n    return (\n"}, nil)
	if st != 400 || problemKind(body) != "invalid" || !strings.Contains(string(body), "SyntaxError") {
		t.Errorf("saving a syntax error: %d %s", st, body)
	}
}
