package tagengine

import (
	"context"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

func f64(v float64) *float64 { return &v }

// The write path refuses a write outside a tag's engineering limits with
// Bad_OutOfRange naming the limit, before scaling and before the driver;
// a scaled write whose raw value the register cannot hold is refused
// naming the raw value and the type's range; values at the limits pass.
func TestEngine_Write_Limits(t *testing.T) {
	drv := newFake()
	tags := []Tag{
		{Path: "L/Setpoint", Device: "d", Point: device.Point{Address: "sp", Type: value.Int16}, Min: f64(0), Max: f64(100)},
		{Path: "L/Floor", Device: "d", Point: device.Point{Address: "fl", Type: value.Float64}, Min: f64(-1.5)},
		{Path: "L/Scaled", Device: "d", Point: device.Point{Address: "sc", Type: value.Int16}, Scale: Scale{Factor: 0.1}, Max: f64(5000)},
		{Path: "L/Array", Device: "d", Point: device.Point{Address: "ar", Type: value.Float64}, Max: f64(10)},
	}
	audit := &memAudit{}
	e, err := New(Config{Audit: audit}, map[string]device.Driver{"d": drv}, tags)
	if err != nil {
		t.Fatal(err)
	}
	g := auth.Grant{Principal: "t", Scopes: []auth.Scope{auth.TagWrite}, WriteLevel: auth.LevelDesign}
	for _, tt := range []struct {
		path   string
		v      value.Value
		q      value.Quality
		reason string
		wrote  string
	}{
		{"L/Setpoint", int64(100), value.Good, "", "sp=100"},
		{"L/Setpoint", int64(0), value.Good, "", "sp=0"},
		{"L/Setpoint", int64(101), value.BadOutOfRange, "out of range: 101 is above the tag's max of 100 (limits 0 to 100)", ""},
		{"L/Setpoint", float64(-0.5), value.BadOutOfRange, "out of range: -0.5 is below the tag's min of 0 (limits 0 to 100)", ""},
		{"L/Setpoint", "abc", value.BadTypeMismatch, "", ""}, // not a number: the type check refuses it
		{"L/Floor", float64(-2), value.BadOutOfRange, "out of range: -2 is below the tag's min of -1.5 (limits at least -1.5)", ""},
		{"L/Floor", float64(1e9), value.Good, "", "fl=1e+09"},
		// 4000 engineering is raw 40000: within max 5000, outside int16.
		{"L/Scaled", int64(4000), value.BadOutOfRange, "out of range: 4000 scales to the raw value 40000, outside the int16 range (-32768 to 32767)", ""},
		{"L/Scaled", int64(5001), value.BadOutOfRange, "out of range: 5001 is above the tag's max of 5000 (limits at most 5000)", ""},
		{"L/Scaled", float64(3276.7), value.Good, "", "sc=32767"},
		{"L/Array", []any{1.0, 11.0}, value.BadOutOfRange, "element 1: out of range: 11 is above the tag's max of 10 (limits at most 10)", ""},
	} {
		before := drv.nwrites()
		res, err := e.Write(context.Background(), g, []WriteRequest{{Path: tt.path, Value: tt.v}})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.Quality != tt.q || (tt.reason != "" && r.Reason != tt.reason) {
			t.Errorf("%s = %v: %s %q, want %s %q", tt.path, tt.v, r.Quality, r.Reason, tt.q, tt.reason)
		}
		switch got := drv.nwrites() - before; {
		case tt.wrote == "" && got != 0:
			t.Errorf("%s = %v: a refused write reached the driver", tt.path, tt.v)
		case tt.wrote != "" && (got != 1 || drv.writes[len(drv.writes)-1] != tt.wrote):
			t.Errorf("%s = %v: driver writes %v, want %s", tt.path, tt.v, drv.writes, tt.wrote)
		}
	}
	// Each refusal is audited with the limit in its detail.
	var refused int
	for _, ev := range audit.evs {
		if ev.Action == "tag.write.refused" && ev.Result == "Bad_OutOfRange" {
			refused++
		}
	}
	if refused != 6 {
		t.Errorf("audited %d Bad_OutOfRange refusals, want 6", refused)
	}
}
