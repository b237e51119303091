//go:build integration

// Package integration drives the built qubiqd and qubiqctl binaries against
// real third-party peers, through the external contract only (README.md).
// `make test` builds the binaries and runs it with -tags integration;
// QUBIQ_BIN names the directory holding them.
package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bins returns the directory with qubiqd and qubiqctl: QUBIQ_BIN, or a fresh
// build into a temporary directory.
func bins(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if d := os.Getenv("QUBIQ_BIN"); d != "" {
			binDir = d
			return
		}
		dir, err := os.MkdirTemp("", "qubiq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		for _, c := range []string{"qubiqd", "qubiqctl"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, c), "qubiq.dev/edge/cmd/"+c).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("build %s: %v: %s", c, err, out)
				return
			}
		}
		binDir = dir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// pythonPath is the interpreter the workers run: PYTHON_PATH, else the
// resolved /usr/bin/python3.
func pythonPath(t *testing.T) string {
	if p := os.Getenv("PYTHON_PATH"); p != "" {
		return p
	}
	p, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Fatalf("no /usr/bin/python3 (make test installs it): %v", err)
	}
	return p
}

// daemon is one qubiqd process.
type daemon struct {
	t       *testing.T
	dir     string
	cfg     string
	url     string
	env     []string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	logMu   *sync.Mutex
	token   string
	exitErr chan error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// newDaemon writes qubiq.yaml and project.yaml into a fresh directory; start
// runs it.
func newDaemon(t *testing.T, project string, extraEnv ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	port := peers.FreePort(t)
	cfg := fmt.Sprintf(`appliance_id: it-01
data_dir: data
project: project.yaml
http: {listen: "127.0.0.1:%d"}
python: {replicas: 2, gateway_timeout: {default: 5s, min: 10ms, max: 1m}}
store: {open_timeout: 2s}
`, port)
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, dir: dir, cfg: filepath.Join(dir, "qubiq.yaml"), url: fmt.Sprintf("http://127.0.0.1:%d", port),
		env: append([]string{"PYTHON_PATH=" + pythonPath(t)}, extraEnv...), log: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("qubiqd log:\n%s", d.logs())
		}
	})
	return d
}

func (d *daemon) logs() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.log.String()
}

// start runs qubiqd and waits until /api/v1/health answers and the
// sandbox's workers, which start after READY=1, are no longer starting.
func (d *daemon) start() {
	d.t.Helper()
	d.spawn()
	d.awaitHealth()
}

// spawn starts qubiqd and returns at once.
func (d *daemon) spawn() {
	d.t.Helper()
	d.cmd = exec.Command(filepath.Join(bins(d.t), "qubiqd"), "--config", d.cfg)
	d.cmd.Env = append(os.Environ(), d.env...)
	w := lockedWriter{d.logMu, d.log}
	d.cmd.Stdout, d.cmd.Stderr = w, w
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exitErr = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(d.cmd, d.exitErr)
}

// awaitHealth waits until /api/v1/health answers and the sandbox is no
// longer starting, and reads the bootstrap token.
func (d *daemon) awaitHealth() {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-d.exitErr:
			d.cmd = nil
			d.t.Fatalf("qubiqd exited at start: %v\n%s", err, d.logs())
		default:
		}
		resp, err := http.Get(d.url + "/api/v1/health")
		if err == nil {
			var h struct {
				Sandbox struct {
					Python struct{ Status string } `json:"python"`
				} `json:"sandbox"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if derr == nil && h.Sandbox.Python.Status == "starting" {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if tok, err := os.ReadFile(filepath.Join(d.dir, "data", "bootstrap-token")); err == nil {
				d.token = strings.TrimSpace(string(tok))
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("qubiqd did not answer /health within 30s:\n%s", d.logs())
}

// stop sends SIGTERM and waits for the exit.
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exitErr:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exitErr
		d.t.Errorf("qubiqd did not stop within 20s of SIGTERM")
	}
	d.cmd = nil
}

// call does one API request with token as bearer and decodes the JSON
// answer into out (when non-nil). It returns the status code and raw body.
func (d *daemon) call(method, path, token string, body any, out any) (int, []byte) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.url+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			d.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// apiKey creates a key with the bootstrap token and returns its token.
func (d *daemon) apiKey(name string, scopes []string, level string, perms ...string) string {
	d.t.Helper()
	var out struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	st, raw := d.call("POST", "/api/v1/apikeys", d.token, map[string]any{"name": name, "scopes": scopes,
		"write_level": level, "permissions": perms}, &out)
	if st != 200 && st != 201 {
		d.t.Fatalf("create api key %s: %d %s", name, st, raw)
	}
	return out.Token
}

type tagValue struct {
	Path      string      `json:"path"`
	Value     json.Number `json:"value"`
	Quality   string      `json:"quality"`
	Timestamp string      `json:"timestamp"`
	Reason    string      `json:"reason"`
}

// read reads tags over REST.
func (d *daemon) read(token string, paths ...string) map[string]tagValue {
	d.t.Helper()
	var raw []map[string]any
	st, body := d.call("POST", "/api/v1/tags/read", token, map[string]any{"paths": paths}, &raw)
	if st != 200 {
		d.t.Fatalf("read: %d %s", st, body)
	}
	out := map[string]tagValue{}
	for _, r := range raw {
		tv := tagValue{Path: fmt.Sprint(r["path"]), Quality: fmt.Sprint(r["quality"])}
		if r["value"] != nil {
			tv.Value = json.Number(fmt.Sprint(r["value"]))
		}
		if s, ok := r["reason"].(string); ok {
			tv.Reason = s
		}
		out[tv.Path] = tv
	}
	return out
}

// waitFor polls cond every 50 ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
}
