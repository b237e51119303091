package tagengine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// restoringFake is a fakeDriver that holds values itself (device.Restorer)
// and browses (device.Browser).
type restoringFake struct {
	*fakeDriver
	rmu      sync.Mutex
	restored map[string]value.Value
}

func (r *restoringFake) Restore(p device.Point, v value.Value) bool {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	r.restored[p.Address] = v
	return true
}

func (r *restoringFake) Browse(_ context.Context, node string) ([]device.BrowseResult, error) {
	if node == "missing" {
		return nil, device.Errorf(value.BadNodeIDUnknown, "no node %q", node)
	}
	return []device.BrowseResult{{NodeID: node + "/x", BrowseName: "x", NodeClass: "Variable", DataType: "Double"}}, nil
}

func waitRead(t *testing.T, e *Engine, path string, q value.Quality) value.VQT {
	t.Helper()
	g := auth.Full("t", auth.RealmPlatform, "test")
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := e.Read(g, []string{path})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Quality == q {
			return res[0].VQT
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: quality %s (%s), want %s", path, res[0].Quality, res[0].Reason, q)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEngine_TakeOver_CarriesValuesAndSubscribers(t *testing.T) {
	ctx := context.Background()
	g := auth.Full("t", auth.RealmPlatform, "test")
	drv := newFake()
	drv.vals["a"] = value.VQT{Value: int64(7), Quality: value.Good}
	drv.vals["b"] = value.VQT{Value: int64(8), Quality: value.Good}
	drv.vals["c"] = value.VQT{Value: int64(9), Quality: value.Good}
	scan := 10 * time.Millisecond
	old, err := New(Config{}, map[string]device.Driver{"d": drv}, []Tag{
		{Path: "A", Device: "d", Point: device.Point{Address: "a", Type: value.Int16}, Scan: scan},
		{Path: "B", Device: "d", Point: device.Point{Address: "b", Type: value.Int16}, Scan: scan},
		{Path: "C", Device: "d", Point: device.Point{Address: "c", Type: value.Int16}, Scan: scan},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, _, cancel := old.Subscribe(64)
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitRead(t, old, "C", value.Good)
	if err := old.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The successor: A the same (new units), B moved to another address,
	// C removed, D added.
	drv2 := newFake()
	drv2.vals["a"] = value.VQT{Value: int64(70), Quality: value.Good}
	drv2.vals["b2"] = value.VQT{Value: int64(80), Quality: value.Good}
	next, err := New(Config{}, map[string]device.Driver{"d": drv2}, []Tag{
		{Path: "A", Device: "d", Point: device.Point{Address: "a", Type: value.Int16}, Scan: scan, Units: "rpm"},
		{Path: "B", Device: "d", Point: device.Point{Address: "b2", Type: value.Int16}, Scan: scan},
		{Path: "D", Device: "d", Point: device.Point{Address: "d", Type: value.Int16}, Scan: scan},
	})
	if err != nil {
		t.Fatal(err)
	}
	before := old.Counts()
	if before.Scans == 0 || before.Changes == 0 {
		t.Fatalf("old engine's counts %+v: want scans and changes", before)
	}
	next.TakeOver(old, nil)
	// The counters go on from old's (they count since the daemon's start).
	if got := next.Counts(); got.Scans != before.Scans || got.Changes != before.Changes || got.Overruns != before.Overruns {
		t.Errorf("counts after TakeOver %+v, want old's %+v (tags aside)", got, before)
	}
	res, err := next.Read(g, []string{"A", "B", "C", "D"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		q value.Quality
		v value.Value
	}{{value.Good, int64(7)}, {value.BadWaitingForInitialData, nil}, {value.BadNodeIDUnknown, nil}, {value.BadWaitingForInitialData, nil}}
	for i, w := range want {
		if res[i].Quality != w.q || !value.Equal(res[i].Value, w.v) {
			t.Errorf("%s before start = %v %s, want %v %s", res[i].Path, res[i].Value, res[i].Quality, w.v, w.q)
		}
	}
	// Drain what the old engine published; then the successor's changes
	// reach the same subscription.
	for len(ch) > 0 {
		<-ch
	}
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer next.Stop(ctx)
	seen := map[string]bool{}
	timeout := time.After(5 * time.Second)
	for !seen["A"] || !seen["B"] {
		select {
		case c := <-ch:
			seen[c.Path] = true
			if c.Path == "A" && !value.Equal(c.Value, int64(70)) {
				t.Errorf("A changed to %v, want 70", c.Value)
			}
		case <-timeout:
			t.Fatalf("changes of the successor not delivered to the old subscription: %v", seen)
		}
	}
	// A late push into the retired engine is not published.
	old.publish([]Change{{Path: "C", VQT: value.VQT{Value: int64(1), Quality: value.Good}}})
	cancel()
	next.subs.Lock()
	n := len(next.subs.m)
	next.subs.Unlock()
	if n != 0 {
		t.Fatalf("cancel of a subscription made on the old engine left %d subscribers on the successor", n)
	}
	for len(ch) > 0 {
		if c := <-ch; c.Path == "C" {
			t.Fatal("a retired engine published a change")
		}
	}
}

func TestEngine_TakeOver_RestoresAndHonoursKeepDevice(t *testing.T) {
	tags := []Tag{
		{Path: "M", Device: "d", Point: device.Point{Address: "m", Type: value.Float64}, Scale: Scale{Factor: 2}},
		{Path: "N", Device: "e", Point: device.Point{Address: "n", Type: value.Float64}},
	}
	mk := func() (*Engine, *restoringFake, *restoringFake) {
		d := &restoringFake{fakeDriver: newFake(), restored: map[string]value.Value{}}
		e2 := &restoringFake{fakeDriver: newFake(), restored: map[string]value.Value{}}
		eng, err := New(Config{}, map[string]device.Driver{"d": d, "e": e2}, tags)
		if err != nil {
			t.Fatal(err)
		}
		return eng, d, e2
	}
	old, _, _ := mk()
	old.Seed(map[string]value.VQT{"M": {Value: 10.0, Quality: value.Good, Time: time.Now()},
		"N": {Value: 3.0, Quality: value.Good, Time: time.Now()}})
	next, d, e := mk()
	next.TakeOver(old, func(name string) bool { return name != "e" })
	if got := d.restored["m"]; !value.Equal(got, 5.0) {
		t.Errorf("restored raw value = %v, want 5 (10 / factor 2)", got)
	}
	if len(e.restored) != 0 {
		t.Errorf("a device keepDevice refused got values: %v", e.restored)
	}
	res, _ := next.Read(auth.Full("t", auth.RealmPlatform, "test"), []string{"M", "N"})
	if res[0].Quality != value.UncertainLastUsableValue || !value.Equal(res[0].Value, 10.0) {
		t.Errorf("M = %v %s, want the seeded 10 as Uncertain_LastUsableValue", res[0].Value, res[0].Quality)
	}
	if res[1].Quality != value.BadWaitingForInitialData {
		t.Errorf("N on a changed device = %v %s, want Bad_WaitingForInitialData", res[1].Value, res[1].Quality)
	}
}

func TestEngine_Browse_Errors(t *testing.T) {
	plain := newFake()
	br := &restoringFake{fakeDriver: newFake(), restored: map[string]value.Value{}}
	e, err := New(Config{}, map[string]device.Driver{"plain": plain, "ua": br}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dev, node string
		want            error
		wantQ           value.Quality
	}{
		{name: "unknown device", dev: "nope", want: ErrUnknownDevice},
		{name: "cannot browse", dev: "plain", want: ErrNotBrowsable},
		{name: "unknown node", dev: "ua", node: "missing", wantQ: value.BadNodeIDUnknown},
		{name: "children", dev: "ua", node: "root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Browse(context.Background(), tt.dev, tt.node)
			switch {
			case tt.want != nil:
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
			case tt.wantQ != 0:
				if q, _ := device.QualityOf(err); q != tt.wantQ {
					t.Fatalf("err = %v, want quality %s", err, tt.wantQ)
				}
			default:
				if err != nil || len(res) != 1 || res[0].NodeID != "root/x" {
					t.Fatalf("Browse = %+v, %v", res, err)
				}
			}
		})
	}
}
