package systemd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

func TestReady_SendsReadyToNotifySocket(t *testing.T) {
	c := listen(t)
	if !Ready() {
		t.Fatal("Ready reported no notification")
	}
	buf := make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}

func TestWatchdog_WithholdsPingWithoutProgress(t *testing.T) {
	c := listen(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: pings every 50 ms
	alive := true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Watchdog(ctx, func(time.Duration) error {
			if alive {
				return nil
			}
			return errors.New("stuck")
		}, slog.New(slog.DiscardHandler))
		close(done)
	}()
	buf := make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "WATCHDOG=1") {
		t.Fatalf("no ping while alive: %q %v", buf[:n], err)
	}
	cancel()
	<-done
	// Now not alive: no ping within several intervals.
	alive = false
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go Watchdog(ctx, func(time.Duration) error { return errors.New("stuck") }, slog.New(slog.DiscardHandler))
	// drain anything from the first run
	for {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("pinged without progress: %q", buf[:n])
	}
}
