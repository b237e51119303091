package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

// newTestDriver returns a driver whose clock is at start+elapsed.
func newTestDriver(t *testing.T, elapsed *time.Duration) *Driver {
	t.Helper()
	drv, err := New(device.Config{Name: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*Driver)
	if elapsed != nil {
		d.now = func() time.Time { return d.start.Add(*elapsed) }
	}
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func pt(addr string, typ value.Type) device.Point {
	return device.Point{Tag: "Sim/" + addr + "/" + typ.String(), Address: addr, Type: typ}
}

func TestDriver_Conformance(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) (device.Driver, []device.Point) {
		return newTestDriver(t, nil), []device.Point{
			pt("ramp(0,100,10s)", value.Float64), pt("sine(-1,1,5s)", value.Float32),
			pt("random(0,10)", value.Int32), pt("memory", value.String),
		}
	})
}

func TestNew_Config(t *testing.T) {
	for _, raw := range []string{``, `{}`, ` { } `} {
		if _, err := New(device.Config{Name: "sim", Raw: []byte(raw)}); err != nil {
			t.Errorf("New(%q): %v", raw, err)
		}
	}
	_, err := New(device.Config{Name: "sim", Raw: []byte(`{"period": "1s"}`)})
	if err == nil || !strings.Contains(err.Error(), `"period"`) {
		t.Errorf("New with a key = %v, want an error naming the key", err)
	}
}

func TestDriver_Read_Generators(t *testing.T) {
	tests := []struct {
		addr    string
		typ     value.Type
		elapsed time.Duration
		want    value.Value
	}{
		{"ramp(0,100,10s)", value.Float64, 0, 0.0},
		{"ramp(0,100,10s)", value.Float64, 2500 * time.Millisecond, 25.0},
		{"ramp(0,100,10s)", value.Float64, 12500 * time.Millisecond, 25.0}, // wraps
		{"ramp(-10,10,4s)", value.Float64, 3 * time.Second, 5.0},
		{"ramp(0,100,10s)", value.Int16, 2549 * time.Millisecond, int64(25)},
		{"ramp(0,100,10s)", value.Int16, 2551 * time.Millisecond, int64(26)}, // rounded
		{"ramp(0,100,10s)", value.Uint32, 9 * time.Second, uint64(90)},
		{"ramp(0,100,10s)", value.Bool, 4 * time.Second, false},
		{"ramp(0,100,10s)", value.Bool, 6 * time.Second, true},
		{"ramp(0,100,10s)", value.String, 5 * time.Second, "50"},
		{"sine(-1,1,4s)", value.Float64, 0, 0.0},
		{"sine(-1,1,4s)", value.Float64, time.Second, 1.0},
		{"sine(0,10,4s)", value.Float64, 3 * time.Second, 0.0},
		{"sine(-1, 1, 4s)", value.Int16, time.Second, int64(1)},
		{" ramp( 0 , 1 , 1s ) ", value.Float64, 0, 0.0},
	}
	for _, tt := range tests {
		t.Run(tt.addr+" "+tt.typ.String()+" "+tt.elapsed.String(), func(t *testing.T) {
			el := tt.elapsed
			d := newTestDriver(t, &el)
			v := d.Read(context.Background(), []device.Point{pt(tt.addr, tt.typ)})[0]
			if v.Quality != value.Good {
				t.Fatalf("quality %s %q", v.Quality, v.Reason)
			}
			got := v.Value
			if f, ok := got.(float64); ok {
				if w := tt.want.(float64); f-w > 1e-9 || w-f > 1e-9 {
					t.Errorf("value %v, want %v", f, w)
				}
			} else if got != tt.want {
				t.Errorf("value %v (%T), want %v (%T)", got, got, tt.want, tt.want)
			}
			if v.Time.Location() != time.UTC || v.Time.IsZero() {
				t.Errorf("time %v, want UTC", v.Time)
			}
		})
	}
}

func TestDriver_Read_Random(t *testing.T) {
	d := newTestDriver(t, nil)
	points := []device.Point{pt("random(5,6)", value.Float64), pt("random(-3,3)", value.Int16)}
	for range 200 {
		vs := d.Read(context.Background(), points)
		if f := vs[0].Value.(float64); vs[0].Quality != value.Good || f < 5 || f > 6 {
			t.Fatalf("random(5,6) = %v %s", vs[0].Value, vs[0].Quality)
		}
		if i := vs[1].Value.(int64); vs[1].Quality != value.Good || i < -3 || i > 3 {
			t.Fatalf("random(-3,3) int16 = %v %s", vs[1].Value, vs[1].Quality)
		}
	}
}

func TestDriver_Memory(t *testing.T) {
	tests := []struct {
		typ   value.Type
		zero  value.Value
		write value.Value
		want  value.Value
	}{
		{value.Bool, false, true, true},
		{value.Int16, int64(0), -20, int64(-20)},
		{value.Uint64, uint64(0), uint64(1 << 63), uint64(1 << 63)},
		{value.Float32, 0.0, 1.5, 1.5},
		{value.Float64, 0.0, 2, 2.0},
		{value.String, "", "hello", "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			d := newTestDriver(t, nil)
			p := pt("memory", tt.typ)
			other := p
			other.Tag = "Sim/other"
			if v := d.Read(context.Background(), []device.Point{p})[0]; v.Quality != value.Good || v.Value != tt.zero {
				t.Errorf("initial = %v %s, want Good %v", v.Value, v.Quality, tt.zero)
			}
			if err := devicetest.Write(context.Background(), d, p, tt.write); err != nil {
				t.Fatalf("Write: %v", err)
			}
			vs := d.Read(context.Background(), []device.Point{p, other})
			if vs[0].Quality != value.Good || vs[0].Value != tt.want {
				t.Errorf("after write = %v %s, want Good %v", vs[0].Value, vs[0].Quality, tt.want)
			}
			if vs[1].Value != tt.zero {
				t.Errorf("another tag path = %v, want its own zero %v", vs[1].Value, tt.zero)
			}
		})
	}
}

func TestDriver_Write_Refused(t *testing.T) {
	tests := []struct {
		name string
		p    device.Point
		v    value.Value
		q    value.Quality
	}{
		{"ramp", pt("ramp(0,1,1s)", value.Float64), 1.0, value.BadNotWritable},
		{"random", pt("random(0,1)", value.Float64), 1.0, value.BadNotWritable},
		{"out of range", pt("memory", value.Int16), 40000, value.BadOutOfRange},
		{"type mismatch", pt("memory", value.Int16), "abc", value.BadTypeMismatch},
		{"fraction", pt("memory", value.Int32), 1.5, value.BadTypeMismatch},
		{"bad address", pt("nope", value.Int32), 1, value.BadConfigurationError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDriver(t, nil)
			err := devicetest.Write(context.Background(), d, tt.p, tt.v)
			var qe *device.QualityError
			if !errors.As(err, &qe) || qe.Quality != tt.q {
				t.Errorf("Write = %v, want a %s QualityError", err, tt.q)
			}
		})
	}
}

func TestDriver_CheckPoint_Errors(t *testing.T) {
	tests := []struct {
		addr string
		typ  value.Type
		want string
	}{
		{"ramp(0,100)", value.Float64, "takes 3 arguments"},
		{"random(0,1,2s)", value.Float64, "takes 2 arguments"},
		{"ramp(0,100,0s)", value.Float64, "must be > 0"},
		{"ramp(0,100,fast)", value.Float64, "period"},
		{"ramp(a,100,1s)", value.Float64, "lo"},
		{"ramp(0,NaN,1s)", value.Float64, "hi"},
		{"ramp(10,0,1s)", value.Float64, "above hi"},
		{"square(0,1,1s)", value.Float64, "unknown generator"},
		{"ramp(0,1,1s)x", value.Float64, "want ramp"},
		{"Memory", value.Float64, "want ramp"},
		{"HR100", value.Float64, "want ramp"},
		{"ramp(0,100000,1s)", value.Int16, "does not fit int16"},
		{"random(-1,1)", value.Uint16, "does not fit uint16"},
		{"memory", value.Auto, "not supported"},
		{"memory", value.TypeUnknown, "not supported"},
	}
	d := newTestDriver(t, nil)
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := d.CheckPoint(pt(tt.addr, tt.typ))
			if err == nil {
				t.Fatal("CheckPoint = nil, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"`+tt.addr+`"`) {
				t.Errorf("CheckPoint = %q, want it to contain %q and name the address", err, tt.want)
			}
			v := d.Read(context.Background(), []device.Point{pt(tt.addr, tt.typ)})[0]
			if v.Quality != value.BadConfigurationError {
				t.Errorf("Read quality %s, want Bad_ConfigurationError", v.Quality)
			}
		})
	}
}

func TestDriver_State(t *testing.T) {
	d := newTestDriver(t, nil)
	if err := d.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.State(); s != "connected" {
		t.Errorf("State = %q, want connected", s)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.State(); s != "disconnected" {
		t.Errorf("State after Close = %q, want disconnected", s)
	}
	if v := d.Read(context.Background(), []device.Point{pt("memory", value.Int16)})[0]; v.Quality != value.BadNotConnected {
		t.Errorf("Read after Close = %s, want Bad_NotConnected", v.Quality)
	}
}

// The simulator never sends a non-finite number: a range wider than a
// float64 (whose generators would compute ±Inf and NaN) is refused, and
// register-string options are not the simulator's.
func TestSim_RefusesNonFiniteRangesAndStringOptions(t *testing.T) {
	d, err := New(device.Config{Name: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []device.Point{
		{Address: "ramp(-1e308,1e308,10s)", Type: value.Float64},
		{Address: "memory", Type: value.String, Encoding: "latin1"},
		{Address: "memory", Type: value.String, StringByteOrder: "low"},
	} {
		if err := d.CheckPoint(p); err == nil {
			t.Errorf("CheckPoint(%+v) = nil", p)
		}
	}
}
