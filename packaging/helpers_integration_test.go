//go:build integration

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built holds the packages the integration tests share: two versions, so
// that an upgrade can be tested.
var (
	buildMu sync.Mutex
	builds  = map[string]string{} // version → out dir
)

// TestMain removes the packages built for the tests (a few hundred MB).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range builds {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// buildPackage runs `package` for version once per test binary and returns
// its output directory (with bin-ARCH/, slot-ARCH/, the .deb).
func buildPackage(t *testing.T, version string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if dir, ok := builds[version]; ok {
		return dir
	}
	dir, err := os.MkdirTemp("", "qubiq-pkg-"+version+"-")
	if err != nil {
		t.Fatal(err)
	}
	// A separate process, as `make package` runs it: this test binary is
	// built with the race detector, under which nfpm's compression is many
	// times slower.
	cmd := exec.Command("go", "run", "./packaging", "package", "--version", version, "--arch", runtime.GOARCH, "--out", dir,
		"--trusted-keys", "packaging/keys/dev-firmware-signing.pub")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("package %s: %v\n%s", version, err, out)
	}
	builds[version] = dir
	return dir
}

func debPath(dir, version string) string {
	return filepath.Join(dir, fmt.Sprintf("qubiq_%s_%s.deb", version, runtime.GOARCH))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a started daemon process with its captured output.
type proc struct {
	cmd  *exec.Cmd
	out  *lockedBuf
	done chan error
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func start(t *testing.T, name string, args []string, env []string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), out: &lockedBuf{}, done: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), p.out.String())
		}
	})
	return p
}

// stop sends SIGTERM and waits (SIGKILL after 20 s).
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("process did not stop within 20 s of SIGTERM")
	}
}

// health waits until url/api/v1/health answers and returns its JSON.
func health(t *testing.T, p *proc, url string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("daemon exited: %v\n%s", err, p.out.String())
		default:
		}
		resp, err := http.Get(url + "/api/v1/health")
		if err == nil {
			var h map[string]any
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			// The sandbox's workers start after READY=1
			// (docs/appliance.md, "Readiness"): the health that counts
			// is the one once they are no longer starting.
			if err == nil && pythonStatus(h) != "starting" {
				return h
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no /api/v1/health with the sandbox started within 60 s\n%s", p.out.String())
	return nil
}

// pythonStatus is sandbox.python.status of a health answer ("" when absent).
func pythonStatus(h map[string]any) string {
	sb, _ := h["sandbox"].(map[string]any)
	py, _ := sb["python"].(map[string]any)
	s, _ := py["status"].(string)
	return s
}

// call does one JSON request with a bearer token.
func call(t *testing.T, method, url, token string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// runScript saves a script and runs it with token, returning its result.
func runScript(t *testing.T, url, token string) map[string]any {
	t.Helper()
	code := "def calc(args):\n    return {'sum': args['a'] + args['b'], 'root': math.sqrt(args['a'] * args['b']), 'json': json.dumps([1, 2])}\n"
	if st := call(t, "PUT", url+"/api/v1/scripts/appliance", token, map[string]any{"code": code}, nil); st != 200 {
		t.Fatalf("save script: %d", st)
	}
	var out struct {
		Result map[string]any `json:"result"`
	}
	if st := call(t, "POST", url+"/api/v1/scripts/appliance/calc/run", token, map[string]any{"args": map[string]any{"a": 4, "b": 9}}, &out); st != 200 {
		t.Fatalf("run script: %d", st)
	}
	if out.Result["sum"] != 13.0 || out.Result["root"] != 6.0 || out.Result["json"] != "[1, 2]" {
		t.Fatalf("script result %v", out.Result)
	}
	return out.Result
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mustStdout runs a command and returns its standard output only.
func mustStdout(t *testing.T, name string, args ...string) string {
	t.Helper()
	var errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	return string(out)
}
