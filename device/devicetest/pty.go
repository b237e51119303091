package devicetest

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// Socat is the Debian socat that links two pseudo-terminals for RTU tests
// (socat's own pty pair: `socat -d -d pty,raw,echo=0 pty,raw,echo=0`).
const Socat = "/usr/bin/socat"

var ptyLine = regexp.MustCompile(`PTY is (/dev/\S+)`)

// PTYPair starts socat linking two raw pseudo-terminals and returns their
// paths: what is written to one is read from the other, as on a serial
// line without its timing. t.Cleanup stops socat. It fails t when socat is
// missing (make test installs it) or does not announce both ends in 10 s.
func PTYPair(t testing.TB) (a, b string) {
	t.Helper()
	if _, err := os.Stat(Socat); err != nil {
		t.Fatalf("RTU tests need Debian's socat at %s (make test installs it): %v", Socat, err)
	}
	cmd := exec.Command(Socat, "-d", "-d", "pty,raw,echo=0", "pty,raw,echo=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start socat: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	paths := make(chan string, 2)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := ptyLine.FindStringSubmatch(sc.Text()); m != nil {
				paths <- m[1]
			}
		}
		_ = cmd.Wait()
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	var got []string
	for len(got) < 2 {
		select {
		case p := <-paths:
			got = append(got, p)
		case <-timer.C:
			t.Fatalf("socat did not announce two ptys in 10 s")
		}
	}
	return got[0], got[1]
}

// OpenPTY opens the pseudo-terminal at path for a fake slave to serve
// (ModbusServer.ServeRTU); the server's Stop closes it.
func OpenPTY(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty %s: %v", path, err)
	}
	return f
}
