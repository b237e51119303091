package tagengine

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// ceilingTags is the number of tags of one scan in BenchmarkEngineCeiling:
// one group, every tenth tag with history on.
const ceilingTags = 10000

// BenchmarkEngineCeiling measures the tag engine's ceiling (bench-engine,
// bench/README.md): one op is one scan of ceilingTags values through
// apply, with three subscribers draining it (history, a WebSocket-like
// subscription, a flow-like consumer that filters by path and computes
// a value). "changed": every value differs from the last, so every update
// is published to all three; each op waits until they received it all.
// "unchanged": the values equal the current ones, so nothing is
// published. Reported per update: ns/update, updates/s and allocs/update.
// Run it on one core: go test -run '^$' -bench EngineCeiling -cpu 1.
func BenchmarkEngineCeiling(b *testing.B) {
	for _, mode := range []string{"changed", "unchanged"} {
		b.Run(mode, func(b *testing.B) { benchCeiling(b, mode == "changed") })
	}
}

func benchCeiling(b *testing.B, changing bool) {
	tags := make([]Tag, ceilingTags)
	for i := range tags {
		tags[i] = Tag{Path: fmt.Sprintf("Line%d/Cell%02d/T%05d", i/1000, i/100%100, i), Device: "d", Scan: time.Second,
			Point: device.Point{Address: strconv.Itoa(i), Type: value.Float64}}
		if i%10 == 0 {
			tags[i].History = &HistoryPolicy{}
		}
	}
	e, err := New(Config{}, map[string]device.Driver{"d": newFake()}, tags)
	if err != nil {
		b.Fatal(err)
	}
	g := e.groups[0]
	// Two sets of values, each value different in the two: the driver's
	// work (and its boxing of values) is not what is measured.
	now := time.Now()
	var vals [2][]value.VQT
	for k := range vals {
		vals[k] = make([]value.VQT, ceilingTags)
		for i := range vals[k] {
			vals[k][i] = value.VQT{Value: float64(i) + float64(k)*0.5, Quality: value.Good, Time: now}
		}
	}
	var received atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	consume := func(ch <-chan Change, work func(Change)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case c := <-ch:
					work(c)
					received.Add(1)
				case <-stop:
					return
				}
			}
		}()
	}
	hist, histDropped, cancelH := e.SubscribeHistory(65536)
	ws, wsDropped, cancelW := e.Subscribe(65536)
	flow, flowDropped, cancelF := e.Subscribe(65536)
	var sink float64
	consume(hist, func(c Change) { _ = c.Time })
	consume(ws, func(c Change) { _ = c.Quality })
	consume(flow, func(c Change) {
		if len(c.Path) > 4 && c.Path[:4] == "Line" {
			if f, ok := c.Value.(float64); ok {
				sink = f*0.1 + 3
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
		cancelH()
		cancelW()
		cancelF()
		_ = sink
	}()
	perScan := int64(2*ceilingTags + ceilingTags/10) // two subscribers get all, history a tenth
	e.apply(g, vals[0], 0)                           // the first scan makes every tag Good
	for received.Load() < perScan {
		runtime.Gosched()
	}
	received.Store(0)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if changing {
			e.apply(g, vals[(i+1)%2], 0)
			want := int64(i+1) * perScan
			for received.Load() < want {
				runtime.Gosched()
			}
		} else {
			e.apply(g, vals[0], 0)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	updates := float64(b.N) * ceilingTags
	b.ReportMetric(float64(el.Nanoseconds())/updates, "ns/update")
	b.ReportMetric(updates/el.Seconds(), "updates/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/updates, "allocs/update")
	if d := histDropped() + wsDropped() + flowDropped(); d > 0 {
		b.Fatalf("%d changes dropped: the consumers did not get every update", d)
	}
}
