package opcua

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

const vendorNS = "urn:vendor:plc"

// testLogger logs to t until the test ends.
func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// testConfig is a config for srv with durations scaled down for tests.
func testConfig(t testing.TB, srv *uaServer, pki string) Config {
	c := DefaultConfig
	c.URL = srv.URL()
	c.PKIDir = pki
	c.Timeout = device.Duration(2 * time.Second)
	c.PublishingInterval = device.Duration(200 * time.Millisecond)
	c.SessionTimeout = device.Duration(20 * time.Second)
	c.ReconnectMin = device.Duration(50 * time.Millisecond)
	c.ReconnectMax = device.Duration(400 * time.Millisecond)
	c.ApplicationURI = "urn:qubiq:test:client"
	return c
}

// openDriver opens a driver with cfg and closes it at the end of the test.
func openDriver(t testing.TB, cfg Config) *Driver {
	t.Helper()
	d := NewDriver("ua1", cfg, testLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func vpoint(name string, typ value.Type) device.Point {
	return device.Point{Tag: "T/" + name, Address: "nsu=" + vendorNS + ";s=" + name, Type: typ}
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

// waitState waits until State reports state.
func waitState(t testing.TB, d *Driver, state string, within time.Duration) {
	t.Helper()
	waitFor(t, within, "state "+state, func() bool {
		s, _ := d.State()
		return s == state
	})
}

// readOne reads one point.
func readOne(t testing.TB, d *Driver, p device.Point) value.VQT {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.Read(ctx, []device.Point{p})[0]
}

// recorder collects subscription deliveries.
type recorder struct {
	mu   sync.Mutex
	vals map[int][]value.VQT
	ch   chan struct{}
}

func newRecorder() *recorder {
	return &recorder{vals: map[int][]value.VQT{}, ch: make(chan struct{}, 1)}
}

func (r *recorder) fn(i int, v value.VQT) {
	r.mu.Lock()
	r.vals[i] = append(r.vals[i], v)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *recorder) last(i int) (value.VQT, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.vals[i]
	if len(vs) == 0 {
		return value.VQT{}, false
	}
	return vs[len(vs)-1], true
}

func (r *recorder) all(i int) []value.VQT {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]value.VQT(nil), r.vals[i]...)
}

func (r *recorder) count(i int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.vals[i])
}
