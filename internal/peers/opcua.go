package peers

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// The node-opcua peer (scripts/ensure-deps.sh installs it: node-opcua 2.160.0 on Node 20): the test
// server of the OPC UA driver, device/opcua/testdata/server.js with its
// package.json, reused as they are (found next to this file in the source
// tree). npm installs it once per package.json into the user cache
// directory, the same folder the driver's own tests use
// (<cache>/qubiq-edge/opcua-peer-<hash>); the script is copied there as
// server-<hash>.js. A peer that cannot be installed or started fails the
// test.

var (
	uaOnce   sync.Once
	uaDir    string
	uaScript string
	uaErr    error
)

// OPCUAHome installs node-opcua (once per cache key) and returns the folder
// holding node_modules and the file name of server.js there.
func OPCUAHome(t testing.TB) (dir, script string) {
	t.Helper()
	uaOnce.Do(func() { uaDir, uaScript, uaErr = installOPCUA() })
	if uaErr != nil {
		t.Fatalf("node-opcua peer: %v", uaErr)
	}
	return uaDir, uaScript
}

// opcuaTestdata is device/opcua/testdata in this source tree.
func opcuaTestdata() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the source tree (runtime.Caller)")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "device", "opcua", "testdata"), nil
}

func installOPCUA() (string, string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", "", fmt.Errorf("%s not found on PATH (Node 20 and npm run the node-opcua test server): %w", tool, err)
		}
	}
	td, err := opcuaTestdata()
	if err != nil {
		return "", "", err
	}
	pkg, err := os.ReadFile(filepath.Join(td, "package.json"))
	if err != nil {
		return "", "", err
	}
	script, err := os.ReadFile(filepath.Join(td, "server.js"))
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(pkg)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "qubiq-edge", "opcua-peer-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	// One install at a time across test processes (the driver's tests may
	// install into the same folder).
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-opcua", "package.json")); err != nil {
		if err := os.WriteFile(filepath.Join(dir, "package.json"), pkg, 0o644); err != nil {
			return "", "", err
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("npm install in %s: %v\n%s", dir, err, out)
		}
	}
	ssum := sha256.Sum256(script)
	name := "server-" + hex.EncodeToString(ssum[:6]) + ".js"
	if old, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(old, script) {
		f, err := os.CreateTemp(dir, name+".tmp-*")
		if err != nil {
			return "", "", err
		}
		_, werr := f.Write(script)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(f.Name(), filepath.Join(dir, name))
		}
		if werr != nil {
			os.Remove(f.Name())
			return "", "", werr
		}
	}
	return dir, name, nil
}

// OPCUA is a running node-opcua test server on 127.0.0.1:Port (see
// server.js for its address space: namespace "urn:vendor:plc" with one
// writable variable per built-in type, a Counter that increments every
// 50 ms, ...). PKI is the server's own certificate folder (its identity:
// the same across restarts); Namespaces and Thumbprint are those of the
// running instance.
type OPCUA struct {
	Port int
	PKI  string

	t          testing.TB
	mu         sync.Mutex
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	replies    chan map[string]any
	stderr     *syncBuffer
	namespaces []string
	thumbprint string
}

// StartOPCUA starts server.js with args (server.js's flags: --policies,
// --modes, --users, --extra-ns-first, ...) on a free loopback port and
// stops it at the end of the test.
func StartOPCUA(t testing.TB, args ...string) *OPCUA {
	t.Helper()
	s := NewOPCUA(t, FreePort(t), t.TempDir())
	s.Start(args...)
	t.Cleanup(s.Stop)
	return s
}

// NewOPCUA returns a server for port with its certificate folder pki, not
// started: Start runs it (a second server on a port, with another
// certificate, is how a test plays a man in the middle). The caller stops
// it.
func NewOPCUA(t testing.TB, port int, pki string) *OPCUA {
	return &OPCUA{t: t, Port: port, PKI: pki}
}

// URL is the server's endpoint URL.
func (s *OPCUA) URL() string { return fmt.Sprintf("opc.tcp://127.0.0.1:%d", s.Port) }

// Namespaces returns the namespace array of the running instance.
func (s *OPCUA) Namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.namespaces...)
}

// NamespaceIndex returns uri's index in the running instance's namespace
// array, failing the test when it is absent.
func (s *OPCUA) NamespaceIndex(uri string) int {
	s.t.Helper()
	for i, n := range s.Namespaces() {
		if n == uri {
			return i
		}
	}
	s.t.Fatalf("namespace %q not served (have %v)", uri, s.Namespaces())
	return -1
}

// Thumbprint is the SHA-1 thumbprint of the server's certificate, lower-case hex.
func (s *OPCUA) Thumbprint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thumbprint
}

// Start (re)starts the server on its port with its PKI folder and args; a
// port still held by a server just stopped is retried for a few seconds.
func (s *OPCUA) Start(args ...string) {
	t := s.t
	t.Helper()
	home, script := OPCUAHome(t)
	full := append([]string{script, "--port", fmt.Sprint(s.Port), "--pki", s.PKI, "--counter-ms", "50"}, args...)
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		cmd := exec.Command("node", full...)
		cmd.Dir = home
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start node server.js: %v", err)
		}
		ready := make(chan map[string]any, 1)
		replies := make(chan map[string]any, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				var m map[string]any
				switch {
				case strings.HasPrefix(line, "READY "):
					if json.Unmarshal([]byte(line[6:]), &m) == nil {
						ready <- m
					}
				case strings.HasPrefix(line, "R "):
					if json.Unmarshal([]byte(line[2:]), &m) == nil {
						replies <- m
					}
				}
			}
			close(replies)
		}()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		timer := time.NewTimer(60 * time.Second)
		select {
		case m := <-ready:
			timer.Stop()
			var ns []string
			if arr, ok := m["namespaces"].([]any); ok {
				for _, n := range arr {
					ns = append(ns, fmt.Sprint(n))
				}
			}
			s.mu.Lock()
			s.cmd, s.stdin, s.replies, s.stderr = cmd, stdin, replies, stderr
			s.namespaces, s.thumbprint = ns, fmt.Sprint(m["thumbprint"])
			s.mu.Unlock()
			go func() { <-exited }()
			return
		case err := <-exited:
			timer.Stop()
			lastErr = fmt.Errorf("server.js exited before READY: %v\n%s", err, stderr)
			time.Sleep(500 * time.Millisecond)
		case <-timer.C:
			_ = cmd.Process.Kill()
			t.Fatalf("server.js not READY within 60s\n%s", stderr)
		}
	}
	t.Fatalf("node-opcua server on port %d did not start: %v", s.Port, lastErr)
}

// Stop ends the server (SIGTERM, then SIGKILL after 5 s).
func (s *OPCUA) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 250 && cmd.Process.Signal(syscall.Signal(0)) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
}

// Kill ends the server at once (SIGKILL): no goodbye to its clients.
func (s *OPCUA) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		for i := 0; i < 250 && cmd.Process.Signal(syscall.Signal(0)) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Cmd sends one command line to the server (server.js: stats, set NAME
// JSON, get NAME, delete NAME, ...) and returns its reply; an error reply
// or no reply within 10 s fails the test.
func (s *OPCUA) Cmd(line string) map[string]any {
	s.t.Helper()
	m, err := s.CmdErr(line)
	if err != nil {
		s.t.Fatalf("server command %q: %v", line, err)
	}
	return m
}

// CmdErr sends one command line to server.js and returns its reply, or the
// error it answered (or that it exited, or did not answer within 10 s).
func (s *OPCUA) CmdErr(line string) (map[string]any, error) {
	s.t.Helper()
	s.mu.Lock()
	stdin, replies, stderr := s.stdin, s.replies, s.stderr
	s.mu.Unlock()
	if stdin == nil {
		return nil, errors.New("the server is not running")
	}
	if _, err := io.WriteString(stdin, line+"\n"); err != nil {
		return nil, err
	}
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case m, ok := <-replies:
		if !ok {
			return nil, fmt.Errorf("the server exited\n%s", stderr)
		}
		if e, ok := m["error"]; ok {
			return nil, fmt.Errorf("%v", e)
		}
		return m, nil
	case <-timer.C:
		return nil, errors.New("no reply within 10s")
	}
}

// OPCUAStats are server.js's session, subscription and item counts (its
// "stats" command).
type OPCUAStats struct {
	Sessions          int            `json:"sessions"`
	Subscriptions     int            `json:"subscriptions"`
	MonitoredItems    int            `json:"monitoredItems"`
	CreatedSessions   int            `json:"createdSessions"`
	ActivatedSessions int            `json:"activatedSessions"`
	ClosedSessions    map[string]int `json:"closedSessions"`
	ClosedDeleting    int            `json:"closedDeletingSubscriptions"`
}

// Stats returns the server's counts.
func (s *OPCUA) Stats() OPCUAStats {
	s.t.Helper()
	m := s.Cmd("stats")
	b, err := json.Marshal(m)
	if err != nil {
		s.t.Fatal(err)
	}
	var st OPCUAStats
	if err := json.Unmarshal(b, &st); err != nil {
		s.t.Fatalf("stats %s: %v", b, err)
	}
	return st
}

// syncBuffer collects a process's stderr for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
