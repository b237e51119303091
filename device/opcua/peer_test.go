package opcua

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The node-opcua peer (PEERS.md: node-opcua 2.160.0 on Node 20). Its npm
// install lives outside the repository, in the user cache directory, keyed
// by the hash of testdata/package.json; testdata/server.js is copied there
// as server-<hash>.js. A peer that cannot be installed or started fails the
// test.

var (
	peerOnce   sync.Once
	peerDir    string
	peerScript string
	peerErr    error
)

// peerHome installs node-opcua (once per cache key) and returns the folder
// holding node_modules and the name of this version of server.js there
// (named by its hash, so that checkouts with other versions of the script
// can share the install).
func peerHome(t testing.TB) (dir, script string) {
	t.Helper()
	peerOnce.Do(func() { peerDir, peerScript, peerErr = installPeer() })
	if peerErr != nil {
		t.Fatalf("node-opcua peer: %v", peerErr)
	}
	return peerDir, peerScript
}

func installPeer() (string, string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", "", fmt.Errorf("%s not found on PATH (Node 20 and npm are needed to run the node-opcua test server): %w", tool, err)
		}
	}
	pkg, err := os.ReadFile(filepath.Join("testdata", "package.json"))
	if err != nil {
		return "", "", err
	}
	script, err := os.ReadFile(filepath.Join("testdata", "server.js"))
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
	// One install at a time across test processes.
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
		out, err := cmd.CombinedOutput()
		if err != nil {
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

// uaServer is a running node-opcua test server.
type uaServer struct {
	t    testing.TB
	Port int
	PKI  string // the server's own PKI folder (its identity)
	args []string

	mu         sync.Mutex
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	replies    chan map[string]any
	stderr     *lockedWriter
	Namespaces []string
	Thumbprint string
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServer starts server.js on a free loopback port with its own PKI
// folder and args, and stops it at the end of the test.
func startServer(t testing.TB, args ...string) *uaServer {
	t.Helper()
	s := &uaServer{t: t, Port: freePort(t), PKI: t.TempDir()}
	s.Start(args...)
	t.Cleanup(s.Stop)
	return s
}

func (s *uaServer) URL() string { return fmt.Sprintf("opc.tcp://127.0.0.1:%d", s.Port) }

// Start (re)starts the server on its port with args.
func (s *uaServer) Start(args ...string) {
	t := s.t
	t.Helper()
	home, script := peerHome(t)
	s.args = args
	full := append([]string{script, "--port", fmt.Sprint(s.Port), "--pki", s.PKI, "--counter-ms", "50"}, args...)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
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
		stderr := &lockedWriter{}
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
		select {
		case m := <-ready:
			s.mu.Lock()
			s.cmd, s.stdin, s.replies, s.stderr = cmd, stdin, replies, stderr
			s.Namespaces = nil
			for _, n := range m["namespaces"].([]any) {
				s.Namespaces = append(s.Namespaces, n.(string))
			}
			s.Thumbprint = m["thumbprint"].(string)
			s.mu.Unlock()
			go func() { <-exited }()
			return
		case err := <-exited:
			// The port may still be held by a server just stopped.
			lastErr = fmt.Errorf("server.js exited before READY: %v\n%s", err, stderr)
			time.Sleep(300 * time.Millisecond)
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("server.js not READY within 60s\n%s", stderr)
		}
	}
	t.Fatalf("node-opcua server on port %d did not start: %v", s.Port, lastErr)
}

// Stop ends the server (SIGTERM, then SIGKILL after 5 s).
func (s *uaServer) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cmd.Process.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
}

// Kill ends the server at once (SIGKILL): no goodbye to its clients.
func (s *uaServer) Kill() {
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

// Cmd sends one command line to the server and returns its reply; an
// error reply fails the test.
func (s *uaServer) Cmd(line string) map[string]any {
	s.t.Helper()
	m, err := s.CmdErr(line)
	if err != nil {
		s.t.Fatalf("server command %q: %v", line, err)
	}
	return m
}

// CmdErr sends one command line and returns its reply or its error.
func (s *uaServer) CmdErr(line string) (map[string]any, error) {
	s.t.Helper()
	s.mu.Lock()
	stdin, replies, stderr := s.stdin, s.replies, s.stderr
	s.mu.Unlock()
	if _, err := io.WriteString(stdin, line+"\n"); err != nil {
		return nil, err
	}
	select {
	case m, ok := <-replies:
		if !ok {
			return nil, fmt.Errorf("server exited\n%s", stderr)
		}
		if e, ok := m["error"]; ok {
			return nil, fmt.Errorf("%v", e)
		}
		return m, nil
	case <-time.After(10 * time.Second):
		return nil, errors.New("no reply")
	}
}

// Stats returns the server's session, subscription and item counts.
func (s *uaServer) Stats() serverStats {
	m := s.Cmd("stats")
	b, _ := json.Marshal(m)
	var st serverStats
	_ = json.Unmarshal(b, &st)
	return st
}

type serverStats struct {
	Sessions          int            `json:"sessions"`
	Subscriptions     int            `json:"subscriptions"`
	MonitoredItems    int            `json:"monitoredItems"`
	CreatedSessions   int            `json:"createdSessions"`
	ActivatedSessions int            `json:"activatedSessions"`
	ClosedSessions    map[string]int `json:"closedSessions"`
	ClosedDeleting    int            `json:"closedDeletingSubscriptions"`
}

// lockedWriter collects a process's stderr for failure messages.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
