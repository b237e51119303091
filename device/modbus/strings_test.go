package modbus

import (
	"context"
	"fmt"
	"testing"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

func strPoint(addr, sbo, enc string) device.Point {
	p := pt(addr, value.String, "")
	p.StringByteOrder, p.Encoding = sbo, enc
	return p
}

// A device string ends at its first NUL; what follows is not text. Byte
// order within a register and the encoding are the tag's.
func TestRegisterStrings_Read(t *testing.T) {
	tests := []struct {
		name     string
		sbo, enc string
		regs     []uint16
		want     string
	}{
		{"ends at the first NUL", "", "", []uint16{'A'<<8 | 'B', 0x0000 | 'x', 'y'<<8 | 'z'}, "AB"},
		{"NUL in the low byte", "", "", []uint16{'A'<<8 | 'B', 'C' << 8, 'G'<<8 | 'H'}, "ABC"},
		{"low byte first", "low", "", []uint16{'B'<<8 | 'A', 'D'<<8 | 'C'}, "ABCD"},
		{"low byte first, NUL", "low", "", []uint16{'B'<<8 | 'A', 0x0043, 'x'}, "ABC"},
		{"high byte first explicit", "high", "ascii", []uint16{'O'<<8 | 'K'}, "OK"},
		{"latin1", "", "latin1", []uint16{0x4BFC, 0x686C}, "Kühl"},
		{"utf8", "", "utf8", []uint16{0x4BC3, 0xBC68, 0x6C00}, "Kühl"},
		{"ascii refuses the high half", "", "ascii", []uint16{0x4BFC}, "K\uFFFD"},
		{"utf8 invalid bytes", "", "", []uint16{0x41FF}, "A\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := devicetest.NewModbusServer(t)
			srv.SetHolding(10, tt.regs...)
			d := newTestDriver(t, srv, nil)
			p := strPoint(fmt.Sprintf("HR10:%d", len(tt.regs)), tt.sbo, tt.enc)
			wantGood(t, tt.name, read1(t, d, p), tt.want)
		})
	}
}

// A write encodes in the tag's encoding and byte order and fills the rest
// of the field with NULs; what the encoding cannot hold is refused.
func TestRegisterStrings_Write(t *testing.T) {
	tests := []struct {
		name     string
		sbo, enc string
		in       string
		regs     []uint16
		q        value.Quality
	}{
		{"NUL-filled", "", "", "AB", []uint16{'A'<<8 | 'B', 0, 0}, value.Good},
		{"odd length NUL-filled", "", "", "ABC", []uint16{'A'<<8 | 'B', 'C' << 8, 0}, value.Good},
		{"low byte first", "low", "", "ABC", []uint16{'B'<<8 | 'A', 'C', 0}, value.Good},
		{"latin1", "", "latin1", "Kühl", []uint16{0x4BFC, 0x686C, 0}, value.Good},
		{"utf8", "", "utf8", "Kühl", []uint16{0x4BC3, 0xBC68, 0x6C00}, value.Good},
		{"ascii refuses ü", "", "ascii", "Kühl", nil, value.BadOutOfRange},
		{"latin1 refuses €", "", "latin1", "5€", nil, value.BadOutOfRange},
		{"a NUL inside is refused", "", "", "A\x00B", nil, value.BadOutOfRange},
		{"too long", "", "", "ABCDEFG", nil, value.BadOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := devicetest.NewModbusServer(t)
			srv.SetHolding(10, 0xFFFF, 0xFFFF, 0xFFFF)
			d := newTestDriver(t, srv, nil)
			p := strPoint("HR10:3", tt.sbo, tt.enc)
			err := devicetest.Write(context.Background(), d, p, tt.in)
			if tt.q != value.Good {
				if qe := qualityErr(t, err); qe.Quality != tt.q {
					t.Fatalf("Write = %v, want %s", err, tt.q)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.regs {
				if got, _ := srv.Holding(10 + uint16(i)); got != want {
					t.Errorf("HR%d = 0x%04X, want 0x%04X", 10+i, got, want)
				}
			}
			wantGood(t, "read back", read1(t, d, p), tt.in)
		})
	}
}

func TestRegisterStrings_OptionsChecked(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	d := newTestDriver(t, srv, nil)
	for _, p := range []device.Point{
		strPoint("HR1:2", "middle", ""),
		strPoint("HR1:2", "", "ebcdic"),
		func() device.Point { p := pt("HR1", value.Int16, ""); p.Encoding = "ascii"; return p }(),
		func() device.Point { p := strPoint("HR1:2", "low", ""); p.ByteOrder = "BADC"; return p }(),
	} {
		if err := d.CheckPoint(p); err == nil {
			t.Errorf("CheckPoint(%+v) = nil", p)
		}
	}
}

// unit_id 0 is a unit of its own (a gateway's), not "the device's".
func TestUnitID_ZeroIsAUnit(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 7)
	d := newTestDriver(t, srv, func(c *Config) { c.UnitID = 5 })
	p := pt("HR0", value.Int16, "")
	p.HasUnitID = true // unit_id: 0
	before := srv.Count()
	read1(t, d, p)
	q := pt("HR0", value.Int16, "")
	read1(t, d, q)
	reqs := srv.Requests()[before:]
	if len(reqs) != 2 || reqs[0].Unit != 0 || reqs[1].Unit != 5 {
		t.Fatalf("units %+v, want 0 (unit_id: 0) then 5 (the device's)", reqs)
	}
	if plan := d.Plan([]device.Point{p}); len(plan) != 1 || plan[0].Unit != 0 {
		t.Fatalf("plan %+v, want unit 0", plan)
	}
	rtu := newClosedTestDriver(t, Config{URL: "rtu:///dev/ttyS9", UnitID: 1, Baud: 9600, Parity: "E", DataBits: 8, StopBits: 1,
		Timeout: DefaultConfig.Timeout, WriteMode: WriteMultiple, MaxRegistersPerRequest: 125})
	if err := rtu.CheckPoint(p); err == nil {
		t.Fatal("unit_id 0 accepted on a serial line (the broadcast address)")
	}
}

// The write path parses a point once per configuration.
func TestDriver_Write_ParsesOnce(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 0)
	d := newTestDriver(t, srv, nil)
	p := pt("HR0", value.Int16, "")
	calls := 0
	parse := func(q device.Point) (spec, error) { calls++; return d.spec(q) }
	for i := 0; i < 3; i++ {
		if _, err := d.specs.Get(p, parse); err != nil {
			t.Fatal(err)
		}
		if err := devicetest.Write(context.Background(), d, p, i); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("parsed %d times, want once", calls)
	}
	// A value that was not coerced is refused, never converted here.
	if qe := qualityErr(t, d.Write(context.Background(), p, 5)); qe.Quality != value.BadTypeMismatch {
		t.Fatalf("uncoerced write: %v", qe)
	}
}
