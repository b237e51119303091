package tagengine

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

func engineOf(t *testing.T, tags ...Tag) (*Engine, *fakeDriver) {
	t.Helper()
	drv := newFake()
	for i := range tags {
		if tags[i].Device == "" {
			tags[i].Device = "d"
		}
	}
	e, err := New(Config{}, map[string]device.Driver{"d": drv}, tags)
	if err != nil {
		t.Fatal(err)
	}
	return e, drv
}

// feed gives the tag at path the driver's reading v, as a scan or a
// monitored item does, and returns the change it makes (ok false: none).
func feed(e *Engine, path string, v value.VQT) (Change, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(e.tags[path], v)
}

// A status code alone is a change: Good → Good_Clamped → Good (OPC UA
// 0x00300000) and Uncertain → another Uncertain subcode, with the same
// value, reach subscribers with the new raw status code.
func TestEngine_Update_StatusCodeAloneIsAChange(t *testing.T) {
	e, _ := engineOf(t, Tag{Path: "T", Point: device.Point{Address: "t", Type: value.Float64}, Deadband: Deadband{Absolute: 10}})
	now := time.Now().UTC()
	steps := []struct {
		q    value.Quality
		code uint32
	}{
		{value.Good, 0}, {value.Good, 0x00300000}, {value.Good, 0},
		{value.Uncertain, 0x40940000}, {value.Uncertain, 0x40930000}, {value.Uncertain, 0x40930000},
	}
	wantChange := []bool{true, true, true, true, true, false}
	for i, s := range steps {
		c, ok := feed(e, "T", value.VQT{Value: 5.0, Quality: s.q, StatusCode: s.code, Time: now.Add(time.Duration(i) * time.Second)})
		if ok != wantChange[i] {
			t.Fatalf("step %d (%s 0x%08X): change %v, want %v", i, s.q, s.code, ok, wantChange[i])
		}
		if ok && (c.StatusCode != s.code || c.Quality != s.q || c.Value != 5.0) {
			t.Fatalf("step %d: change %+v, want %s with status 0x%08X", i, c.VQT, s.q, s.code)
		}
	}
	res, _ := e.Read(auth.Full("t", "", ""), []string{"T"})
	if res[0].StatusCode != 0x40930000 {
		t.Fatalf("current status 0x%08X, want 0x40930000", res[0].StatusCode)
	}
}

// A deadband never swallows a bool or string change: every state change of
// a bool reaches subscribers (and history, through them).
func TestEngine_Update_DeadbandNeverHoldsBoolOrString(t *testing.T) {
	e, _ := engineOf(t,
		Tag{Path: "B", Point: device.Point{Address: "b", Type: value.Bool}, Deadband: Deadband{Absolute: 5, Percent: 50}},
		Tag{Path: "S", Point: device.Point{Address: "s", Type: value.String}, Deadband: Deadband{Absolute: 5}},
		Tag{Path: "N", Point: device.Point{Address: "n", Type: value.Float64}, Deadband: Deadband{Absolute: 5}},
	)
	now := time.Now()
	for i, b := range []bool{false, true, false, true} {
		if _, ok := feed(e, "B", value.VQT{Value: b, Quality: value.Good, Time: now}); !ok {
			t.Fatalf("bool change %d to %v held back by the deadband", i, b)
		}
	}
	for i, s := range []string{"a", "b", "c"} {
		if _, ok := feed(e, "S", value.VQT{Value: s, Quality: value.Good, Time: now}); !ok {
			t.Fatalf("string change %d held back", i)
		}
	}
	feed(e, "N", value.VQT{Value: 1.0, Quality: value.Good, Time: now})
	if _, ok := feed(e, "N", value.VQT{Value: 2.0, Quality: value.Good, Time: now}); ok {
		t.Fatal("a numeric change inside the deadband passed")
	}
	if _, ok := feed(e, "N", value.VQT{Value: true, Quality: value.Good, Time: now}); !ok {
		t.Fatal("a change of kind (number to bool) was held back")
	}
}

// A non-finite reading is never Good with no value: it is Bad_OutOfRange
// with a reason naming what came back, and the last known value stays.
func TestEngine_Update_NonFiniteIsBadOutOfRange(t *testing.T) {
	e, _ := engineOf(t,
		Tag{Path: "F", Point: device.Point{Address: "f", Type: value.Float64}},
		Tag{Path: "A", Point: device.Point{Address: "a", Type: value.Auto}},
		Tag{Path: "Sc", Point: device.Point{Address: "sc", Type: value.Float64}, Scale: Scale{Factor: 1e300}},
		Tag{Path: "P", Point: device.Point{Address: "p", Type: value.Float64}, PassNonFinite: true},
	)
	now := time.Now().UTC()
	feed(e, "F", value.VQT{Value: 1.5, Quality: value.Good, Time: now})
	cases := []struct {
		path string
		in   value.Value
		q    value.Quality
		why  string
	}{
		{"F", math.NaN(), value.Good, "the device sent NaN"},
		{"F", math.Inf(1), value.Good, "the device sent +Inf"},
		{"F", math.Inf(-1), value.Uncertain, "the device sent -Inf"},
		{"A", []any{1.0, math.NaN()}, value.Good, "the device sent element 1 is NaN"},
		{"Sc", 1e10, value.Good, "the scaled value is +Inf"},
	}
	for _, c := range cases {
		ch, ok := feed(e, c.path, value.VQT{Value: c.in, Quality: c.q, Time: now, StatusCode: 0})
		if !ok || ch.Quality != value.BadOutOfRange || !strings.Contains(ch.Reason, c.why) {
			t.Fatalf("%s %v: %+v, want Bad_OutOfRange naming %q", c.path, c.in, ch.VQT, c.why)
		}
		if value.NonFinite(ch.Value) != "" {
			t.Fatalf("%s: the non-finite value was kept: %v", c.path, ch.Value)
		}
	}
	res, _ := e.Read(auth.Full("t", "", ""), []string{"F"})
	if res[0].Value != 1.5 {
		t.Fatalf("last known value %v, want 1.5 kept under the bad quality", res[0].Value)
	}
	ch, ok := feed(e, "P", value.VQT{Value: math.NaN(), Quality: value.Good, Time: now})
	if !ok || ch.Quality != value.Uncertain || value.NonFinite(ch.Value) != "NaN" || !strings.Contains(ch.Reason, "the device sent NaN") {
		t.Fatalf("non_finite: pass: %+v, want Uncertain NaN with the reason", ch.VQT)
	}
}

func TestEngine_Write_NonFinite(t *testing.T) {
	e, drv := engineOf(t,
		Tag{Path: "F", Point: device.Point{Address: "f", Type: value.Float64}},
		Tag{Path: "P", Point: device.Point{Address: "p", Type: value.Float32}, PassNonFinite: true},
	)
	g := auth.Full("t", "", "")
	res, err := e.Write(context.Background(), g, []WriteRequest{{Path: "F", Value: math.Inf(1)}, {Path: "P", Value: math.NaN()}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Quality != value.BadOutOfRange || !strings.Contains(res[0].Reason, "+Inf is not a finite number") {
		t.Fatalf("non-finite write: %+v, want Bad_OutOfRange", res[0])
	}
	if res[1].Quality != value.Good || drv.nwrites() != 1 {
		t.Fatalf("opted-in write: %+v (%d writes)", res[1], drv.nwrites())
	}
}

// The write path coerces once: the driver gets the value in the tag's type.
func TestEngine_Write_DriverGetsTheCoercedValue(t *testing.T) {
	e, drv := engineOf(t,
		Tag{Path: "I", Point: device.Point{Address: "i", Type: value.Int16}},
		Tag{Path: "U", Point: device.Point{Address: "u", Type: value.Uint32}},
		Tag{Path: "F", Point: device.Point{Address: "f", Type: value.Float32}},
	)
	g := auth.Full("t", "", "")
	res, _ := e.Write(context.Background(), g, []WriteRequest{{Path: "I", Value: 7.0}, {Path: "U", Value: int64(9)}, {Path: "F", Value: 0.1}})
	for _, r := range res {
		if r.Quality != value.Good {
			t.Fatalf("%+v", r)
		}
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	for addr, want := range map[string]value.Value{"i": int64(7), "u": uint64(9), "f": 0.1} { // f: float32(0.1), as its shortest decimal
		got := drv.vals[addr].Value
		if got != want {
			t.Errorf("driver got %v (%T) for %s, want %v (%T)", got, got, addr, want, want)
		}
	}
}

// A Good reading with no value is not Good: null is kept for qualities
// other than Good.
func TestEngine_Update_GoodWithoutValueIsUncertain(t *testing.T) {
	e, _ := engineOf(t, Tag{Path: "A", Point: device.Point{Address: "a", Type: value.Auto}})
	c, ok := feed(e, "A", value.VQT{Quality: value.Good, Time: time.Now()})
	if !ok || c.Quality != value.Uncertain || c.Reason != "the device sent no value (null)" {
		t.Fatalf("%+v", c.VQT)
	}
}
