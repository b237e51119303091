package modbus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

func TestDriver_Write_Requests(t *testing.T) {
	tests := []struct {
		name  string
		mode  string
		point device.Point
		v     value.Value
		// wire is the PDU (function code and data) the server must get.
		wire string
		// reg/regs is what the server holds afterwards (holding registers from the point's offset).
		regs []uint16
		coil *bool
	}{
		// docs/modbus.md, fault C03: -20 to an int16 is 0xFFEC with FC6 `00 0A FF EC`.
		{"C03 int16 -20 single", WriteSingle, pt("HR10", value.Int16, ""), -20, "06 00 0A FF EC", []uint16{0xFFEC}, nil},
		{"int16 -20 multiple", WriteMultiple, pt("HR10", value.Int16, ""), -20, "10 00 0A 00 01 02 FF EC", []uint16{0xFFEC}, nil},
		{"uint16 single", WriteSingle, pt("40011", value.Uint16, ""), 65516, "06 00 0A FF EC", []uint16{0xFFEC}, nil},
		{"float32 CDAB", WriteMultiple, pt("HR10", value.Float32, "CDAB"), 28.094513, "10 00 0A 00 02 04 C1 90 41 E0", []uint16{0xC190, 0x41E0}, nil},
		{"float32 in single mode uses FC16", WriteSingle, pt("HR10", value.Float32, "ABCD"), 238.6087, "10 00 0A 00 02 04 43 6E 9B D4", []uint16{0x436E, 0x9BD4}, nil},
		{"int32", WriteMultiple, pt("HR10", value.Int32, ""), -2, "10 00 0A 00 02 04 FF FF FF FE", []uint16{0xFFFF, 0xFFFE}, nil},
		{"uint32 from json number", WriteMultiple, pt("HR10", value.Uint32, "CDAB"), 100000.0, "10 00 0A 00 02 04 86 A0 00 01", []uint16{0x86A0, 0x0001}, nil},
		{"string", WriteMultiple, pt("HR10:2", value.String, ""), "Hi", "10 00 0A 00 02 04 48 69 00 00", []uint16{0x4869, 0}, nil},
		{"coil single", WriteSingle, pt("CO3", value.Bool, ""), true, "05 00 03 FF 00", nil, ptrTo(true)},
		{"coil multiple", WriteMultiple, pt("00004", value.Bool, ""), true, "0F 00 03 00 01 01 01", nil, ptrTo(true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := devicetest.NewModbusServer(t)
			srv.SetHolding(10, 0, 0)
			srv.SetCoil(3, false)
			d := newTestDriver(t, srv, func(c *Config) { c.WriteMode = tt.mode })
			before := srv.Count()
			if err := devicetest.Write(context.Background(), d, tt.point, tt.v); err != nil {
				t.Fatalf("Write: %v", err)
			}
			reqs := srv.Requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			if got := fmt.Sprintf("% X", reqs[0].Raw[7:]); got != tt.wire {
				t.Errorf("PDU = %s, want %s", got, tt.wire)
			}
			for i, want := range tt.regs {
				if got, _ := srv.Holding(10 + uint16(i)); got != want {
					t.Errorf("HR%d = 0x%04X, want 0x%04X", 10+i, got, want)
				}
			}
			if tt.coil != nil {
				if got, _ := srv.Coil(3); got != *tt.coil {
					t.Errorf("CO3 = %v, want %v", got, *tt.coil)
				}
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestDriver_Write_RegisterBitReadModifyWrite(t *testing.T) {
	for _, mode := range []string{WriteSingle, WriteMultiple} {
		t.Run(mode, func(t *testing.T) {
			srv := devicetest.NewModbusServer(t)
			srv.SetHolding(5, 0x0001)
			d := newTestDriver(t, srv, func(c *Config) { c.WriteMode = mode })
			before := srv.Count()
			if err := devicetest.Write(context.Background(), d, pt("HR5.3", value.Bool, ""), true); err != nil {
				t.Fatal(err)
			}
			if got, _ := srv.Holding(5); got != 0x0009 {
				t.Errorf("HR5 = 0x%04X, want 0x0009", got)
			}
			if err := devicetest.Write(context.Background(), d, pt("HR5.0", value.Bool, ""), 0); err != nil {
				t.Fatal(err)
			}
			if got, _ := srv.Holding(5); got != 0x0008 {
				t.Errorf("HR5 = 0x%04X, want 0x0008", got)
			}
			var fcs []byte
			for _, r := range srv.Requests()[before:] {
				fcs = append(fcs, r.Function)
			}
			want := []byte{3, 16, 3, 16}
			if mode == WriteSingle {
				want = []byte{3, 6, 3, 6}
			}
			if fmt.Sprint(fcs) != fmt.Sprint(want) {
				t.Errorf("functions %v, want %v (read, then write)", fcs, want)
			}
			wantGood(t, "HR5.3", read1(t, d, pt("HR5.3", value.Bool, "")), true)
		})
	}
}

func TestDriver_Write_Refused(t *testing.T) {
	tests := []struct {
		name  string
		point device.Point
		v     value.Value
		q     value.Quality
	}{
		{"input register", pt("IR0", value.Int16, ""), 1, value.BadNotWritable},
		{"input register bit", pt("IR0.1", value.Bool, ""), true, value.BadNotWritable},
		{"discrete input", pt("DI0", value.Bool, ""), true, value.BadNotWritable},
		{"int16 out of range", pt("HR0", value.Int16, ""), 40000, value.BadOutOfRange},
		{"uint16 negative", pt("HR0", value.Uint16, ""), -1, value.BadOutOfRange},
		{"float32 out of range", pt("HR0", value.Float32, ""), 1e39, value.BadOutOfRange},
		{"string too long", pt("HR0:1", value.String, ""), "abc", value.BadOutOfRange},
		{"text to int16", pt("HR0", value.Int16, ""), "abc", value.BadTypeMismatch},
		{"fraction to int16", pt("HR0", value.Int16, ""), 1.5, value.BadTypeMismatch},
		{"number to bool", pt("CO0", value.Bool, ""), 2, value.BadTypeMismatch},
		{"bad address", pt("40000", value.Int16, ""), 1, value.BadConfigurationError},
		{"exception 2", pt("HR99", value.Int16, ""), 1, value.BadConfigurationError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := devicetest.NewModbusServer(t)
			srv.SetHolding(0, 0)
			srv.SetCoil(0, false)
			d := newTestDriver(t, srv, nil)
			err := devicetest.Write(context.Background(), d, tt.point, tt.v)
			if err == nil {
				t.Fatal("Write = nil, want an error")
			}
			if qe := qualityErr(t, err); qe.Quality != tt.q {
				t.Errorf("Write = %v, want %s", err, tt.q)
			}
		})
	}
}

func TestDriver_Write_TimeoutIsUncertainAndNotRetried(t *testing.T) {
	tests := []struct {
		name  string
		point device.Point
		v     value.Value
	}{
		{"register", pt("HR0", value.Int16, ""), 5},
		{"float32", pt("HR0", value.Float32, ""), 1.5},
		{"coil", pt("CO0", value.Bool, ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := devicetest.NewModbusServer(t)
			srv.SetHolding(0, 0, 0)
			srv.SetCoil(0, false)
			srv.SetHook(func(r devicetest.Request) *devicetest.Reply {
				if r.Function >= 5 {
					return &devicetest.Reply{Delay: 2 * testTimeout} // applied, answered too late
				}
				return nil
			})
			d := newTestDriver(t, srv, nil)
			err := devicetest.Write(context.Background(), d, tt.point, tt.v)
			qe := qualityErr(t, err)
			if qe.Quality != value.Uncertain || qe.Reason != "write timed out; it may have been applied" {
				t.Errorf("Write = %v, want Uncertain: write timed out; it may have been applied", err)
			}
			time.Sleep(3 * testTimeout)
			if n := srv.Count(); n != 1 {
				t.Errorf("server got %d requests, want 1: a timed-out write is never retried", n)
			}
		})
	}
}

func TestDriver_Write_ConnectionLostAfterSendIsUncertain(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 0)
	srv.SetHook(func(r devicetest.Request) *devicetest.Reply { return &devicetest.Reply{NoReply: true, Close: true} })
	d := newTestDriver(t, srv, nil)
	err := devicetest.Write(context.Background(), d, pt("HR0", value.Int16, ""), 1)
	if qe := qualityErr(t, err); qe.Quality != value.Uncertain {
		t.Errorf("Write = %v, want Uncertain", err)
	}
	if n := srv.Count(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestDriver_Write_ServerDownIsNotConnected(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 0)
	d := newTestDriver(t, srv, nil)
	srv.Stop()
	d.Read(context.Background(), []device.Point{pt("HR0", value.Int16, "")}) // notices the outage
	err := devicetest.Write(context.Background(), d, pt("HR0", value.Int16, ""), 1)
	if qe := qualityErr(t, err); qe.Quality != value.BadNotConnected {
		t.Errorf("Write = %v, want Bad_NotConnected (nothing was sent)", err)
	}
}
