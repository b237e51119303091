package harness

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Daemon is one bin/qubiqd started by Start.
type Daemon struct {
	Cmd     *exec.Cmd
	PID     int
	Dir     string        // the temporary directory with qubiq.yaml, project.yaml and data/
	Base    string        // "http://127.0.0.1:PORT", the API
	Ready   time.Duration // from exec to READY=1 on NOTIFY_SOCKET
	Log     string        // the daemon's stderr and stdout
	Pprof   string        // host:port of net/http/pprof when the binary has it (QUBIQ_BENCH_PPROF), else empty
	stopped bool
	exited  chan error
	t       testing.TB
}

// Options say how to start a daemon.
type Options struct {
	Bin     string // the qubiqd binary; default $QUBIQ_BIN/qubiqd, else ../../bin/qubiqd
	Dir     string // the directory to run in; default a new t.TempDir()
	Project string // project.yaml
	// Config is added to qubiq.yaml after data_dir, project and
	// http.listen (which the harness sets); default "python: {replicas: 2}\n".
	Config string
	Pin    string            // taskset CPU list; default "0", "-" for none
	Env    []string          // added to the environment
	Files  map[string]string // more files in Dir (scripts), name → content
	// Profile, when set (or when BENCH_PROFILE is), starts the daemon with
	// QUBIQ_BENCH_PPROF on a free loopback port (a binary built with -tags
	// benchprofile serves pprof there; make profile-NAME builds one).
	Profile bool
}

// Bin returns the qubiqd binary the benchmarks run: $QUBIQ_BIN/qubiqd
// (make sets it), else bin/qubiqd of the repository.
func Bin() string {
	if d := os.Getenv("QUBIQ_BIN"); d != "" {
		return filepath.Join(d, "qubiqd")
	}
	return filepath.Join(RepoRoot(), "bin", "qubiqd")
}

// RepoRoot returns the repository's root, found upwards from the working
// directory by its go.mod.
func RepoRoot() string {
	d, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		p := filepath.Dir(d)
		if p == d {
			return "."
		}
		d = p
	}
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start writes the config and the project into a temporary directory,
// starts qubiqd (pinned with taskset, which execs it in place: the same
// pid), and returns once it sent READY=1 on its NOTIFY_SOCKET and its API
// answers GET /api/v1/health. t.Cleanup stops it.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Bin()
	}
	if _, err := os.Stat(o.Bin); err != nil {
		t.Fatalf("qubiqd binary: %v (make build makes bin/qubiqd)", err)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Config == "" {
		o.Config = "python: {replicas: 2}\n"
	}
	port := FreePort(t)
	cfg := fmt.Sprintf("data_dir: data\nproject: project.yaml\nhttp: {listen: \"127.0.0.1:%d\"}\n%s", port, o.Config)
	files := map[string]string{"qubiq.yaml": cfg}
	if o.Project != "" {
		files["project.yaml"] = o.Project
	}
	for k, v := range o.Files {
		files[k] = v
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(o.Dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// NOTIFY_SOCKET: a datagram socket of our own (sd_notify(3)); the
	// path must stay short (sun_path is 108 bytes).
	sockDir, err := os.MkdirTemp("", "qn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "n")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	args := []string{o.Bin, "--config", filepath.Join(o.Dir, "qubiq.yaml")}
	if o.Pin == "" {
		o.Pin = "0"
	}
	if tk, err := exec.LookPath("taskset"); err == nil && o.Pin != "-" {
		args = append([]string{tk, "-c", o.Pin}, args...)
	}
	d := &Daemon{Dir: o.Dir, Base: fmt.Sprintf("http://127.0.0.1:%d", port), Log: filepath.Join(o.Dir, "qubiqd.log"), t: t}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	cmd.Env = append(cmd.Env, o.Env...)
	if o.Profile || os.Getenv("BENCH_PROFILE") != "" {
		d.Pprof = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		cmd.Env = append(cmd.Env, "QUBIQ_BENCH_PPROF="+d.Pprof)
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start qubiqd: %v", err)
	}
	logf.Close()
	d.Cmd, d.PID = cmd, cmd.Process.Pid
	t.Cleanup(d.Stop)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			_ = nc.SetReadDeadline(time.Now().Add(120 * time.Second))
			n, _, err := nc.ReadFromUnix(buf)
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				if l == "READY=1" {
					ready <- time.Since(start)
					return
				}
			}
		}
	}()
	select {
	case d.Ready = <-ready:
	case err := <-exited:
		d.stopped = true
		log, _ := os.ReadFile(d.Log)
		t.Fatalf("qubiqd exited before READY=1: %v\n%s", err, log)
	case <-time.After(120 * time.Second):
		log, _ := os.ReadFile(d.Log)
		t.Fatalf("qubiqd sent no READY=1 within 120 s:\n%s", log)
	}
	// Wait gets the exit from here on.
	go func() { err := <-exited; exited <- err }()
	d.exited = exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(d.Base + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("qubiqd sent READY=1 but its API does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

// Stop sends SIGTERM and waits up to 30 s for the daemon to exit (then
// kills it). Safe to call twice.
func (d *Daemon) Stop() {
	if d.stopped || d.Cmd == nil {
		return
	}
	d.stopped = true
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.Cmd.Process.Kill()
		<-d.exited
	}
}

// LogTail returns the last n bytes of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	b, _ := os.ReadFile(d.Log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
