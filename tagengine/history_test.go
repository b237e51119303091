package tagengine

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

var h0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func hat(sec float64) time.Time { return h0.Add(time.Duration(sec * float64(time.Second))) }

type histClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *histClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *histClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func drainHistory(ch <-chan Change) []Change {
	var out []Change
	for {
		select {
		case c := <-ch:
			out = append(out, c)
		default:
			return out
		}
	}
}

func histString(cs []Change, path string) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Path == path {
			fmt.Fprintf(&b, "%g=%v/%s ", c.Time.Sub(h0).Seconds(), c.Value, c.Quality)
		}
	}
	return strings.TrimSpace(b.String())
}

// The history recording policy, at its one home (moved here from the
// store with its assertions): a change inside the history deadband is
// skipped, a quality change is recorded, a tag without a policy is not,
// and MaxInterval records the current value again, stamped now.
func TestHistory_Offer_DeadbandQualityMaxInterval(t *testing.T) {
	clk := &histClock{t: hat(0)}
	e, _ := engineOf(t,
		Tag{Path: "A", Point: device.Point{Address: "a", Type: value.Float64}, History: &HistoryPolicy{Deadband: 0.5}},
		Tag{Path: "B", Point: device.Point{Address: "b", Type: value.Float64}, History: &HistoryPolicy{MaxInterval: 10 * time.Second}},
		Tag{Path: "unconfigured", Point: device.Point{Address: "u", Type: value.Float64}},
	)
	e.now = clk.now
	ch, _, cancel := e.SubscribeHistory(64)
	defer cancel()
	vqt := func(sec float64, v value.Value, q value.Quality) value.VQT {
		return value.VQT{Value: v, Quality: q, Time: hat(sec)}
	}
	offer := func(path string, v value.VQT) {
		if c, ok := feed(e, path, v); ok {
			e.publish([]Change{c})
		}
	}
	offer("A", vqt(1, 10.0, value.Good))
	offer("A", vqt(2, 10.4, value.Good))            // inside the deadband: skipped
	offer("A", vqt(3, 10.6, value.Good))            // 0.6 from 10: recorded
	offer("A", vqt(4, 10.6, value.BadNotConnected)) // quality changed: recorded
	offer("unconfigured", vqt(1, 1.0, value.Good))  // no policy: not recorded
	offer("B", vqt(1, 5.0, value.Good))
	clk.set(hat(5))
	e.forceHistory()
	clk.set(hat(12)) // 11 s since B was recorded: forced again, stamped now
	e.forceHistory()
	got := drainHistory(ch)
	if s := histString(got, "A"); s != "1=10/Good 3=10.6/Good 4=10.6/Bad_NotConnected" {
		t.Fatalf("A: %s", s)
	}
	if s := histString(got, "B"); s != "1=5/Good 12=5/Good" {
		t.Fatalf("B: %s", s)
	}
	if s := histString(got, "unconfigured"); s != "" {
		t.Fatal("a tag without history was recorded")
	}
	if e.HistorySkipped() != 1 || len(got) != 5 {
		t.Fatalf("skipped %d, recorded %d; want 1 skipped, 5 recorded", e.HistorySkipped(), len(got))
	}
}

// Every state change of a bool reaches history, whatever the deadband;
// a status code change alone is recorded.
func TestHistory_BoolChangesAndStatusCodes(t *testing.T) {
	e, _ := engineOf(t,
		Tag{Path: "B", Point: device.Point{Address: "b", Type: value.Bool}, History: &HistoryPolicy{Deadband: 5}},
		Tag{Path: "F", Point: device.Point{Address: "f", Type: value.Float64}, History: &HistoryPolicy{Deadband: 5}},
	)
	ch, _, cancel := e.SubscribeHistory(64)
	defer cancel()
	for i, b := range []bool{false, true, false, true, true} {
		if c, ok := feed(e, "B", value.VQT{Value: b, Quality: value.Good, Time: hat(float64(i))}); ok {
			e.publish([]Change{c})
		}
	}
	for i, code := range []uint32{0, 0x00300000, 0} {
		if c, ok := feed(e, "F", value.VQT{Value: 1.0, Quality: value.Good, StatusCode: code, Time: hat(float64(i))}); ok {
			e.publish([]Change{c})
		}
	}
	got := drainHistory(ch)
	if s := histString(got, "B"); s != "0=false/Good 1=true/Good 2=false/Good 3=true/Good" {
		t.Fatalf("B: %s", s)
	}
	var codes []uint32
	for _, c := range got {
		if c.Path == "F" {
			codes = append(codes, c.StatusCode)
		}
	}
	if fmt.Sprint(codes) != "[0 3145728 0]" {
		t.Fatalf("status codes recorded: %v", codes)
	}
}

// A device clock far ahead never stops max-interval samples: the interval
// runs on the gateway's clock.
func TestHistory_MaxIntervalIgnoresDeviceClock(t *testing.T) {
	clk := &histClock{t: hat(0)}
	e, _ := engineOf(t, Tag{Path: "B", Point: device.Point{Address: "b", Type: value.Float64}, History: &HistoryPolicy{MaxInterval: 10 * time.Second}})
	e.now = clk.now
	ch, _, cancel := e.SubscribeHistory(64)
	defer cancel()
	if c, ok := feed(e, "B", value.VQT{Value: 5.0, Quality: value.Good, Time: hat(86400)}); ok { // stamped a day ahead
		e.publish([]Change{c})
	}
	clk.set(hat(11))
	e.forceHistory()
	if got := drainHistory(ch); len(got) != 2 || !got[1].Time.Equal(hat(11)) {
		t.Fatalf("history %+v; want the first sample and a forced one at 11 s", got)
	}
}
