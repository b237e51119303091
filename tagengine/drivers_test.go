package tagengine_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/device/modbus"
	"qubiq.dev/edge/device/sim"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// The real drivers behind the engine: a non-finite number from a Modbus
// float register or from the simulator is Bad_OutOfRange with a reason
// naming it, never Good with no value; a tag that opts in keeps it.
func TestDrivers_NonFiniteReadings(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 0x7FC0, 0x0000)                 // float32 NaN
	srv.SetHolding(2, 0x7F80, 0x0000)                 // float32 +Inf
	srv.SetHolding(4, 0xFFF0, 0x0000, 0x0000, 0x0000) // float64 -Inf
	srv.SetHolding(8, 0x7FC0, 0x0000)                 // float32 NaN, opted in
	raw, _ := json.Marshal(map[string]any{"url": srv.URL(), "timeout": "500ms"})
	mb, err := modbus.New(device.Config{Name: "plc", Raw: raw})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := sim.New(device.Config{Name: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	tags := []tagengine.Tag{
		{Path: "M/NaN", Device: "plc", Point: device.Point{Address: "HR0", Type: value.Float32}},
		{Path: "M/Inf", Device: "plc", Point: device.Point{Address: "HR2", Type: value.Float32}},
		{Path: "M/NegInf", Device: "plc", Point: device.Point{Address: "HR4", Type: value.Float64}},
		{Path: "M/Pass", Device: "plc", Point: device.Point{Address: "HR8", Type: value.Float32}, PassNonFinite: true},
		{Path: "S/Mem", Device: "sim", Point: device.Point{Address: "memory", Type: value.Float64}},
	}
	e, err := tagengine.New(tagengine.Config{}, map[string]device.Driver{"plc": mb, "sim": sm}, tags)
	if err != nil {
		t.Fatal(err)
	}
	// The simulator's memory holds a NaN (put there behind the engine's
	// back: the engine's own write path refuses it for this tag).
	if err := sm.Write(context.Background(), device.Point{Tag: "S/Mem", Address: "memory", Type: value.Float64}, math.NaN()); err != nil {
		t.Fatal(err)
	}
	ch, _, cancel := e.Subscribe(64)
	defer cancel()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	want := map[string]string{"M/NaN": "NaN", "M/Inf": "+Inf", "M/NegInf": "-Inf", "S/Mem": "NaN"}
	got := map[string]value.VQT{}
	deadline := time.After(5 * time.Second)
	for len(got) < len(tags) {
		select {
		case c := <-ch:
			if c.Quality != value.BadWaitingForInitialData && c.Quality != value.UncertainLastUsableValue {
				got[c.Path] = c.VQT
			}
		case <-deadline:
			t.Fatalf("changes: %+v", got)
		}
	}
	for path, what := range want {
		v := got[path]
		if v.Quality != value.BadOutOfRange || !strings.Contains(v.Reason, "the device sent "+what) {
			t.Errorf("%s: %s %q, want Bad_OutOfRange naming %s", path, v.Quality, v.Reason, what)
		}
	}
	if v := got["M/Pass"]; v.Quality != value.Uncertain || value.NonFinite(v.Value) != "NaN" {
		t.Errorf("M/Pass (non_finite: pass): %+v, want Uncertain NaN", v)
	}
	res, _ := e.Read(auth.Full("t", "", ""), []string{"M/NaN"})
	if res[0].Quality.IsGood() {
		t.Fatalf("read: %+v", res[0])
	}
}
