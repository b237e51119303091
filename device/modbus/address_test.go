package modbus

import (
	"strings"
	"testing"
)

func TestParseAddress_Notations(t *testing.T) {
	tests := []struct {
		in      string
		table   Table
		offset  uint16
		bit     int
		length  int
		fc      byte
		zero    string
		modicon string
	}{
		// docs/modbus.md, fault C04, the whole table.
		{"40001", HoldingRegister, 0x0000, -1, 0, 3, "HR0", "40001"},
		{"40110", HoldingRegister, 0x006D, -1, 0, 3, "HR109", "40110"},
		{"HR110", HoldingRegister, 0x006E, -1, 0, 3, "HR110", "40111"},
		{"30001", InputRegister, 0x0000, -1, 0, 4, "IR0", "30001"},
		{"00001", Coil, 0x0000, -1, 0, 1, "CO0", "00001"},
		{"10005", DiscreteInput, 0x0004, -1, 0, 2, "DI4", "10005"},
		{"465536", HoldingRegister, 0xFFFF, -1, 0, 3, "HR65535", "465536"},
		// docs/modbus.md, Tags and addresses.
		{"40101", HoldingRegister, 100, -1, 0, 3, "HR100", "40101"},
		{"400101", HoldingRegister, 100, -1, 0, 3, "HR100", "40101"},
		{"HR100", HoldingRegister, 100, -1, 0, 3, "HR100", "40101"},
		{"hr100", HoldingRegister, 100, -1, 0, 3, "HR100", "40101"},
		{"IR100", InputRegister, 100, -1, 0, 4, "IR100", "30101"},
		{"CO100", Coil, 100, -1, 0, 1, "CO100", "00101"},
		{"DI100", DiscreteInput, 100, -1, 0, 2, "DI100", "10101"},
		{"30001", InputRegister, 0, -1, 0, 4, "IR0", "30001"},
		{"10001", DiscreteInput, 0, -1, 0, 2, "DI0", "10001"},
		{"49999", HoldingRegister, 9998, -1, 0, 3, "HR9998", "49999"},
		{"410000", HoldingRegister, 9999, -1, 0, 3, "HR9999", "410000"},
		{"HR0", HoldingRegister, 0, -1, 0, 3, "HR0", "40001"},
		{"HR65535", HoldingRegister, 65535, -1, 0, 3, "HR65535", "465536"},
		{"HR100.3", HoldingRegister, 100, 3, 0, 3, "HR100.3", "40101.3"},
		{"HR100.15", HoldingRegister, 100, 15, 0, 3, "HR100.15", "40101.15"},
		{"40101.0", HoldingRegister, 100, 0, 0, 3, "HR100.0", "40101.0"},
		{"IR7.1", InputRegister, 7, 1, 0, 4, "IR7.1", "30008.1"},
		{"HR100:10", HoldingRegister, 100, -1, 10, 3, "HR100:10", "40101:10"},
		{"30001:2", InputRegister, 0, -1, 2, 4, "IR0:2", "30001:2"},
		{" HR5 ", HoldingRegister, 5, -1, 0, 3, "HR5", "40006"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAddress(tt.in)
			if err != nil {
				t.Fatalf("ParseAddress(%q): %v", tt.in, err)
			}
			if a.Table != tt.table || a.Offset != tt.offset || a.Bit != tt.bit || a.Length != tt.length {
				t.Errorf("ParseAddress(%q) = %+v, want table %d offset %d bit %d length %d", tt.in, a, tt.table, tt.offset, tt.bit, tt.length)
			}
			if fc := a.Table.readFunction(); fc != tt.fc {
				t.Errorf("function %d, want %d", fc, tt.fc)
			}
			if s := a.String(); s != tt.zero {
				t.Errorf("String() = %q, want %q", s, tt.zero)
			}
			if s := a.Modicon(); s != tt.modicon {
				t.Errorf("Modicon() = %q, want %q", s, tt.modicon)
			}
			back, err := ParseAddress(a.Modicon())
			if err != nil || back != a {
				t.Errorf("ParseAddress(Modicon()) = %+v, %v; want %+v", back, err, a)
			}
		})
	}
}

func TestParseAddress_Errors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"40000", "out of range 1..9999"}, // C04: one-based, 0 is not a register
		{"30000", "out of range 1..9999"},
		{"00000", "out of range 1..9999"},
		{"10000", "out of range 1..9999"},
		{"400000", "out of range 1..65536"},
		{"465537", "out of range 1..65536"}, // C04: beyond 465536
		{"499999", "out of range 1..65536"},
		{"50001", "starts with 0, 1, 3 or 4"},
		{"20001", "starts with 0, 1, 3 or 4"},
		{"4001", "5 or 6 digits"},
		{"4000001", "5 or 6 digits"},
		{"", "empty address"},
		{"HR", "want HR, IR, CO or DI"},
		{"XX100", "want HR, IR, CO or DI"},
		{"HR-1", "want 0..65535"},
		{"HR65536", "want 0..65535"},
		{"HR1x", "want 0..65535"},
		{"HR100.16", "want 0..15"},
		{"HR100.", "want 0..15"},
		{"HR100.-1", "want 0..15"},
		{"CO100.1", "registers only"},
		{"DI100:2", "registers only"},
		{"HR100:0", "want 1..123"},
		{"HR100:124", "want 1..123"},
		{"HR100:", "want 1..123"},
		{"HR65535:2", "runs past register 65535"},
		{"memory", "want HR, IR, CO or DI"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseAddress(tt.in)
			if err == nil {
				t.Fatalf("ParseAddress(%q) = nil error, want %q", tt.in, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseAddress(%q) = %q, want it to contain %q", tt.in, err, tt.want)
			}
			if !strings.Contains(err.Error(), `"`+tt.in+`"`) {
				t.Errorf("ParseAddress(%q) = %q: the error does not name the address", tt.in, err)
			}
		})
	}
}
