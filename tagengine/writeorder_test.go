package tagengine

import (
	"context"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// heldDriver is a driver that holds its values (device.Restorer, like the
// simulator's memory): the engine publishes a written value itself. Its
// Read takes the value when it starts and, when armed, waits for release
// before answering, so a scan can be in flight across a write.
type heldDriver struct {
	fakeDriver
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (h *heldDriver) Restore(device.Point, value.Value) bool { return true }

func (h *heldDriver) Read(ctx context.Context, ps []device.Point) []value.VQT {
	vals := h.fakeDriver.Read(ctx, ps) // the device's state when the read starts
	h.mu.Lock()
	armed := h.armed
	h.armed = false
	h.mu.Unlock()
	if armed {
		close(h.entered)
		<-h.release
	}
	return vals
}

// TestEngine_ScanInFlightDoesNotUndoAWrite: a scan that read the device
// before a write and answers after it must not put the old value back:
// the tag keeps the written value and no change after the write carries
// the old one (the value never goes backwards).
func TestEngine_ScanInFlightDoesNotUndoAWrite(t *testing.T) {
	drv := &heldDriver{fakeDriver: fakeDriver{vals: map[string]value.VQT{"m": {Value: int64(1), Quality: value.Good, Time: time.Now()}}},
		entered: make(chan struct{}), release: make(chan struct{})}
	e, err := New(Config{}, map[string]device.Driver{"d": drv}, []Tag{
		{Path: "M/Mem", Device: "d", Point: device.Point{Address: "m", Type: value.Int64}, Scan: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, _, cancel := e.Subscribe(256)
	defer cancel()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	cur := func() value.VQT {
		e.mu.RLock()
		defer e.mu.RUnlock()
		return e.tags["M/Mem"].cur
	}
	waitFor("the first scan", func() bool { return cur().Value == int64(1) })
	drv.mu.Lock()
	drv.armed = true
	drv.mu.Unlock()
	<-drv.entered // a scan has read 1 and waits
	g := auth.Grant{Principal: "t", Scopes: []auth.Scope{auth.TagWrite}, WriteLevel: auth.LevelDesign}
	res, err := e.Write(context.Background(), g, []WriteRequest{{Path: "M/Mem", Value: int64(7)}})
	if err != nil || res[0].Quality != value.Good {
		t.Fatalf("write: %+v %v", res, err)
	}
	scans, _ := e.Stats()
	close(drv.release) // the stale read answers 1
	waitFor("two more scans", func() bool { n, _ := e.Stats(); return n >= scans+2 })
	if v := cur(); v.Value != int64(7) {
		t.Errorf("after the stale scan the tag holds %v, want the written 7", v.Value)
	}
	var after []any
	written := false
	for len(ch) > 0 {
		c := <-ch
		if written {
			after = append(after, c.Value)
		}
		if c.Value == int64(7) {
			written = true
		}
	}
	if !written {
		t.Fatal("the write was not published")
	}
	for _, v := range after {
		if v == int64(1) {
			t.Errorf("changes after the write %v: the old value came back", after)
		}
	}
}

// wedgedDriver's Read never returns until the test ends: a wedged loop.
type wedgedDriver struct {
	fakeDriver
	stop chan struct{}
}

func (w *wedgedDriver) Read(ctx context.Context, ps []device.Point) []value.VQT {
	select {
	case <-w.stop:
	case <-ctx.Done():
	}
	return make([]value.VQT, len(ps))
}

// TestEngine_ProgressHeldBackByOneWedgedLoop: while one scan loop is stuck
// in a read, Progress stays where that loop last was, even though another
// loop keeps scanning (the systemd watchdog must stop its pings).
func TestEngine_ProgressHeldBackByOneWedgedLoop(t *testing.T) {
	good := newFake()
	wedged := &wedgedDriver{fakeDriver: fakeDriver{vals: map[string]value.VQT{}}, stop: make(chan struct{})}
	e, err := New(Config{}, map[string]device.Driver{"good": good, "wedged": wedged}, []Tag{
		{Path: "G/A", Device: "good", Point: device.Point{Address: "a", Type: value.Int64}, Scan: 10 * time.Millisecond},
		{Path: "W/B", Device: "wedged", Point: device.Point{Address: "b", Type: value.Int64}, Scan: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { close(wedged.stop); e.Stop(context.Background()) }()
	started := e.Progress()
	before, _ := e.Stats()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, _ := e.Stats(); n >= before+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the good loop did not scan")
		}
	}
	if p := e.Progress(); !p.Equal(started) {
		t.Errorf("Progress moved to %s while a loop was wedged since %s", p, started)
	}
}
