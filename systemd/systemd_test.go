package systemd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listen makes the NOTIFY_SOCKET a test reads the daemon's notifications on.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	return c
}

func read(t *testing.T, c *net.UnixConn, wait time.Duration) (string, bool) {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(buf)
	if err != nil {
		return "", false
	}
	return string(buf[:n]), true
}

func TestReadyStatusStopping_ReachTheNotifySocket(t *testing.T) {
	c := listen(t)
	if !Ready() {
		t.Fatal("Ready reported no notification")
	}
	if got, _ := read(t, c, 2*time.Second); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	Status("3 devices, 120 tags\nsecond line")
	if got, _ := read(t, c, 2*time.Second); got != "STATUS=3 devices, 120 tags second line" {
		t.Fatalf("got %q", got)
	}
	ReadyStatus("up")
	if got, _ := read(t, c, 2*time.Second); got != "READY=1\nSTATUS=up" {
		t.Fatalf("got %q", got)
	}
	Stopping()
	if got, _ := read(t, c, 2*time.Second); got != "STOPPING=1" {
		t.Fatalf("got %q", got)
	}
}

func TestNotify_AbstractSocket(t *testing.T) {
	name := "qubiq-test-" + strings.ReplaceAll(t.Name(), "/", "-") + time.Now().Format("150405.000000")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "\x00" + name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv("NOTIFY_SOCKET", "@"+name)
	if err := Notify(StateReady); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, c, 2*time.Second); got != "READY=1" {
		t.Fatalf("got %q", got)
	}
}

func TestNotify_OffSystemdIsNoSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify(StateReady); !errors.Is(err, ErrNoSocket) {
		t.Fatalf("err = %v, want ErrNoSocket", err)
	}
	if Ready() {
		t.Fatal("Ready reported a notification without a socket")
	}
}

func TestWatchdogInterval_FromEnvironment(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", "")
	if got := WatchdogInterval(); got != 30*time.Second {
		t.Fatalf("interval %v", got)
	}
	t.Setenv("WATCHDOG_PID", "1") // another process's watchdog
	if got := WatchdogInterval(); got != 0 {
		t.Fatalf("interval for another pid %v, want 0", got)
	}
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv("WATCHDOG_USEC", "nonsense")
	if got := WatchdogInterval(); got != 0 {
		t.Fatalf("interval %v, want 0", got)
	}
}

// pingsWithin counts WATCHDOG=1 datagrams read within d.
func pingsWithin(t *testing.T, c *net.UnixConn, d time.Duration) (pings int, other []string) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		got, ok := read(t, c, time.Until(end))
		if !ok {
			break
		}
		if got == StateWatchdog {
			pings++
		} else {
			other = append(other, got)
		}
	}
	return pings, other
}

func TestWatchdog_WedgedProgressSourceStopsPings(t *testing.T) {
	c := listen(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: a ping every 50 ms
	t.Setenv("WATCHDOG_PID", "")
	w := NewWatchdog(WatchdogOptions{})
	if w.Interval() != 100*time.Millisecond {
		t.Fatalf("interval %v", w.Interval())
	}
	scan := w.Progress("scan loops")
	api := w.Progress("api")
	var wedged atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the loops: the scan loop wedges when told to
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				api.Mark()
				if !wedged.Load() {
					scan.Mark()
				}
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if n, _ := pingsWithin(t, c, 400*time.Millisecond); n < 3 {
		t.Fatalf("%d pings in 400 ms while both sources progress, want >= 3", n)
	}
	wedged.Store(true)
	// Pings may go on until the last mark is MaxAge (100 ms) old; then
	// STATUS= names the wedged loop and no ping follows it.
	var seq []string
	end := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(end) {
		if got, ok := read(t, c, time.Until(end)); ok {
			seq = append(seq, got)
		}
	}
	at := -1
	for i, m := range seq {
		if strings.HasPrefix(m, "STATUS=watchdog withheld: scan loops: no progress") {
			at = i
		}
	}
	if at < 0 || at > 3 {
		t.Fatalf("wedged: want a withheld STATUS within 2 pings, got %q", seq)
	}
	if rest := seq[at+1:]; len(rest) != 0 {
		t.Fatalf("wedged: notifications after the withheld STATUS: %q", rest)
	}
	if err := w.Healthy(context.Background()); err == nil || !strings.Contains(err.Error(), "scan loops") || strings.Contains(err.Error(), "api") {
		t.Fatalf("Healthy = %v, want only the scan loops named", err)
	}
	wedged.Store(false)
	n, other := pingsWithin(t, c, 300*time.Millisecond)
	if n < 2 || len(other) != 1 || other[0] != "STATUS=running" {
		t.Fatalf("after recovery: %d pings, other %q", n, other)
	}
}

func TestWatchdog_HangingCheckWithholdsPing(t *testing.T) {
	var sent atomic.Int64
	w := NewWatchdog(WatchdogOptions{Interval: 80 * time.Millisecond, CheckTimeout: 20 * time.Millisecond,
		Notify: func(states ...string) error {
			if states[0] == StateWatchdog {
				sent.Add(1)
			}
			return nil
		}})
	block := make(chan struct{})
	defer close(block)
	var hang atomic.Bool
	w.Check("api", func(ctx context.Context) error {
		if hang.Load() {
			<-block // a wedged handler that ignores its context
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	time.Sleep(200 * time.Millisecond)
	if sent.Load() < 2 {
		t.Fatalf("%d pings with a passing check", sent.Load())
	}
	hang.Store(true)
	time.Sleep(60 * time.Millisecond)
	before := sent.Load()
	time.Sleep(250 * time.Millisecond)
	if after := sent.Load(); after != before {
		t.Fatalf("%d pings while the check hangs", after-before)
	}
	err := w.Healthy(context.Background())
	if err == nil || !strings.Contains(err.Error(), "api: no answer within 20ms") {
		t.Fatalf("Healthy = %v", err)
	}
}

func TestWatchdog_OffWithoutInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "")
	w := NewWatchdog(WatchdogOptions{})
	if w.Enabled() {
		t.Fatal("enabled without WATCHDOG_USEC")
	}
	done := make(chan struct{})
	go func() { w.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return without a watchdog")
	}
}

func TestRunWatchdog_OldFormWithholdsPingWithoutProgress(t *testing.T) {
	c := listen(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go RunWatchdog(ctx, func(time.Duration) error { return errors.New("stuck") }, slog.New(slog.DiscardHandler))
	n, _ := pingsWithin(t, c, 300*time.Millisecond)
	if n != 0 {
		t.Fatalf("%d pings without progress", n)
	}
}
