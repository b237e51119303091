package modbus

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

func describePlan(ps []device.PlannedRequest) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("u%d fc%d %d+%d %v", p.Unit, p.Function, p.Start, p.Count, p.Tags))
	}
	return out
}

func describeWire(rs []devicetest.Request) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("u%d fc%d %d+%d", r.Unit, r.Function, r.Address(), r.Quantity()))
	}
	return out
}

func TestDriver_Plan_RequestsOfARead(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(100, make([]uint16, 21)...)
	srv.SetInput(0, 1, 2)
	srv.SetCoil(0, true, false, true)
	d := newTestDriver(t, srv, nil)
	u2 := pt("HR100", value.Int16, "")
	u2.Tag, u2.UnitID = "Gw/Slave2", 2
	points := []device.Point{
		pt("HR118", value.Int16, ""),
		pt("HR100", value.Float32, "CDAB"),
		pt("40000", value.Int16, ""), // does not parse: sends nothing
		pt("IR0", value.Float32, ""),
		pt("00003", value.Bool, ""),
		pt("CO0", value.Bool, ""),
		pt("HR100.3", value.Bool, ""),
		u2,
	}
	want := []string{
		"u1 fc1 0+3 [T/CO0 T/00003]",
		"u1 fc3 100+19 [T/HR100.3 T/HR100 T/HR118]",
		"u1 fc4 0+2 [T/IR0]",
		"u2 fc3 100+1 [Gw/Slave2]",
	}
	got := describePlan(d.Plan(points))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Plan =\n  %v\nwant\n  %v", got, want)
	}
	if n := srv.Count(); n != 0 {
		t.Errorf("Plan sent %d requests, want none", n)
	}
	// The plan is what a Read sends, request for request.
	srv.SetHook(func(r devicetest.Request) *devicetest.Reply {
		if r.Unit == 2 {
			return &devicetest.Reply{Raw: devicetest.Frame(r.TxID, 2, 3, []byte{2, 0, 9})}
		}
		return nil
	})
	d.Read(context.Background(), points)
	var wire []string
	for _, p := range d.Plan(points) {
		wire = append(wire, fmt.Sprintf("u%d fc%d %d+%d", p.Unit, p.Function, p.Start, p.Count))
	}
	if got := describeWire(srv.Requests()); fmt.Sprint(got) != fmt.Sprint(wire) {
		t.Errorf("Read sent %v, Plan says %v", got, wire)
	}
}

func TestDriver_Plan_ShowsRememberedSplit(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(11174, 74)
	srv.SetHolding(11176, 76, 77)
	d := newTestDriver(t, srv, nil)
	points := []device.Point{pt("HR11174", value.Int16, ""), pt("HR11176", value.Int16, ""), pt("HR11177", value.Int16, "")}
	if got, want := describePlan(d.Plan(points)), "[u1 fc3 11174+4 [T/HR11174 T/HR11176 T/HR11177]]"; fmt.Sprint(got) != want {
		t.Errorf("Plan before the device refused = %v, want %v", got, want)
	}
	d.Read(context.Background(), points)
	want := "[u1 fc3 11174+1 [T/HR11174] u1 fc3 11176+2 [T/HR11176 T/HR11177]]"
	if got := describePlan(d.Plan(points)); fmt.Sprint(got) != want {
		t.Errorf("Plan after exception 2 = %v, want %v", got, want)
	}
}

func TestDriver_Plan_Empty(t *testing.T) {
	d := newClosedTestDriver(t, Config{URL: "tcp://127.0.0.1:1", UnitID: 1, Timeout: device.Duration(testTimeout),
		WriteMode: WriteMultiple, MaxGap: 16, MaxRegistersPerRequest: 125})
	if got := d.Plan(nil); len(got) != 0 {
		t.Errorf("Plan(nil) = %v, want no request", got)
	}
	if got := d.Plan([]device.Point{pt("XX1", value.Int16, "")}); len(got) != 0 {
		t.Errorf("Plan of an unparsable point = %v, want no request", got)
	}
}

// TestDriver_Read_PlanCachedUntilChange: a scan of the same points reuses
// the plan made for them; other points, or a split the device forced, make
// a new one, and what goes on the wire follows.
func TestDriver_Read_PlanCachedUntilChange(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 10)
	d := newTestDriver(t, srv, nil)
	points := []device.Point{pt("HR0", value.Int16, ""), pt("HR2", value.Int16, ""), pt("XX", value.Int16, "")}
	first := d.Read(context.Background(), points)
	wantQuality(t, "bad address", first[2], value.BadConfigurationError)
	p1 := d.plans.get(points, 0)
	if p1 == nil {
		t.Fatal("no plan cached after a Read")
	}
	again := d.Read(context.Background(), slices.Clone(points))
	if d.plans.get(points, 0) != p1 || len(d.plans.entries) != 1 {
		t.Error("a Read of equal points made a new plan")
	}
	wantQuality(t, "bad address from the cached plan", again[2], value.BadConfigurationError)
	if again[2].Reason != first[2].Reason || again[2].Time.IsZero() {
		t.Errorf("cached bad point %+v, want %+v with a time", again[2], first[2])
	}
	changed := slices.Clone(points)
	changed[1] = pt("HR10", value.Int16, "")
	before := srv.Count()
	vs := d.Read(context.Background(), changed)
	wantGood(t, "HR10 after the change", vs[1], int64(10))
	if got := describeWire(srv.Requests()[before:]); fmt.Sprint(got) != "[u1 fc3 0+11]" {
		t.Errorf("after the change the wire carried %v, want [u1 fc3 0+11]", got)
	}
	// A split bumps the generation: the cached plan of the merged read is not used again.
	srv.SetHook(func(r devicetest.Request) *devicetest.Reply {
		if r.Quantity() > 1 {
			return &devicetest.Reply{Exception: 2}
		}
		return nil
	})
	d.Read(context.Background(), changed)
	before = srv.Count()
	d.Read(context.Background(), changed)
	if got := describeWire(srv.Requests()[before:]); fmt.Sprint(got) != "[u1 fc3 0+1 u1 fc3 10+1]" {
		t.Errorf("after the split the wire carried %v, want [u1 fc3 0+1 u1 fc3 10+1]", got)
	}
}

// TestDriver_ReadInto_PlanKeepsCallersPoints: a scan's plan keeps the
// caller's points (device.IntoReader: not modified after the call), not a
// copy of them, and the next scan of the same slice finds it; Read, whose
// callers may reuse their slice, plans over a copy.
func TestDriver_ReadInto_PlanKeepsCallersPoints(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 1, 2)
	d := newTestDriver(t, srv, nil)
	points := []device.Point{pt("HR0", value.Int16, ""), pt("HR1", value.Int16, "")}
	out := make([]value.VQT, len(points))
	d.ReadInto(context.Background(), points, out)
	wantGood(t, "HR1", out[1], int64(2))
	p := d.plans.get(points, 0)
	if p == nil || &p.points[0] != &points[0] {
		t.Fatal("the plan of ReadInto does not keep the caller's points")
	}
	d.ReadInto(context.Background(), points, out)
	if d.plans.get(points, 0) != p || len(d.plans.entries) != 1 {
		t.Error("a second ReadInto of the same points made a new plan")
	}
	other := []device.Point{pt("HR1", value.Int16, "")}
	d.Read(context.Background(), other)
	if q := d.plans.get(other, 0); q == nil || &q.points[0] == &other[0] {
		t.Error("the plan of Read keeps the caller's slice, want a copy")
	}
}
