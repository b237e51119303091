package modbus

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"qubiq.dev/edge/value"
)

// regs returns the wire bytes of registers.
func regs(rs ...uint16) []byte {
	var b []byte
	for _, r := range rs {
		b = binary.BigEndian.AppendUint16(b, r)
	}
	return b
}

func mustSpec(t *testing.T, addr string, typ value.Type, order string) spec {
	t.Helper()
	a, err := ParseAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSpec(a, typ, order)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// near reports whether got is within a relative 1e-6 of want (the case
// values are printed with 7-8 significant digits).
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*math.Abs(want)
}

func TestDecodeRegisters_C01Float32Orders(t *testing.T) {
	const want = 28.094513 // the shortest decimal of float32(28.094513) (docs/values.md, "Types"), docs/modbus.md, fault C01
	tests := []struct {
		order  string
		r0, r1 uint16
	}{
		{"ABCD", 0x41E0, 0xC190},
		{"CDAB", 0xC190, 0x41E0},
		{"BADC", 0xE041, 0x90C1},
		{"DCBA", 0x90C1, 0xE041},
	}
	for _, tt := range tests {
		t.Run(tt.order, func(t *testing.T) {
			s := mustSpec(t, "HR100", value.Float32, tt.order)
			raw := regs(tt.r0, tt.r1)
			v, err := decodeRegisters(s, raw)
			if err != nil {
				t.Fatal(err)
			}
			if v != any(float64(want)) {
				t.Errorf("decode %s % X = %v, want exactly %v", tt.order, raw, v, want)
			}
			if float32(v.(float64)) != float32(28.094513) {
				t.Errorf("decode %s = %v, want float32 28.094513", tt.order, v)
			}
			enc, err := encodeRegisters(s, float64(want))
			if err != nil {
				t.Fatal(err)
			}
			if string(enc) != string(raw) {
				t.Errorf("encode %s = % X, want % X", tt.order, enc, raw)
			}
		})
	}
}

func TestDecodeRegisters_C01WrongOrderCrossCheck(t *testing.T) {
	raw := regs(0x41E0, 0xC190) // the ABCD registers
	tests := []struct {
		order string
		want  float64
	}{
		{"ABCD", 28.094513},
		{"CDAB", -18.032166},
		{"BADC", -5.579144e19},
		{"DCBA", -7.647060e-29},
	}
	for _, tt := range tests {
		t.Run(tt.order, func(t *testing.T) {
			v, err := decodeRegisters(mustSpec(t, "HR100", value.Float32, tt.order), raw)
			if err != nil {
				t.Fatal(err)
			}
			if !near(v.(float64), tt.want) {
				t.Errorf("ABCD registers read as %s = %v, want %v", tt.order, v, tt.want)
			}
		})
	}
}

func TestDecodeRegisters_C01IntegerWrongOrder(t *testing.T) {
	tests := []struct {
		name  string
		typ   value.Type
		order string
		raw   []byte
		want  value.Value
	}{
		{"uint32 ABCD right", value.Uint32, "ABCD", regs(0x0001, 0x86A0), uint64(100000)},
		{"uint32 CDAB right", value.Uint32, "CDAB", regs(0x86A0, 0x0001), uint64(100000)},
		{"uint32 device CDAB tag ABCD", value.Uint32, "ABCD", regs(0x86A0, 0x0001), uint64(2258632705)},
		{"int32 device CDAB tag ABCD", value.Int32, "ABCD", regs(0x86A0, 0x0001), int64(-2036334591)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := decodeRegisters(mustSpec(t, "HR100", tt.typ, tt.order), tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			if v != tt.want {
				t.Errorf("decode = %v (%T), want %v (%T)", v, v, tt.want, tt.want)
			}
		})
	}
}

func TestDecodeRegisters_C02IEEEFloatNotScaledInt(t *testing.T) {
	raw := regs(0x9BD4, 0x436E) // HR2, HR3
	v, err := decodeRegisters(mustSpec(t, "HR2", value.Float32, "CDAB"), raw)
	if err != nil {
		t.Fatal(err)
	}
	if v != any(238.6087) || float32(v.(float64)) != float32(238.6087) {
		t.Errorf("float32 CDAB = %v, want 238.6087", v)
	}
	// The misreading of the case comes only from an explicit uint32 tag
	// (scaled by 0.01 in the tag engine): 0x436E9BD4.
	u, err := decodeRegisters(mustSpec(t, "HR2", value.Uint32, "CDAB"), raw)
	if err != nil {
		t.Fatal(err)
	}
	if u != any(uint64(0x436E9BD4)) || !near(float64(u.(uint64))*0.01, 11313223.24) {
		t.Errorf("uint32 CDAB = %v, want %d", u, 0x436E9BD4)
	}
}

func TestDecodeRegisters_C03SignedUnsigned16(t *testing.T) {
	tests := []struct {
		typ  value.Type
		reg  uint16
		want value.Value
	}{
		{value.Int16, 0xFFEC, int64(-20)},
		{value.Int16, 0xFED4, int64(-300)},
		{value.Uint16, 0xFFEC, uint64(65516)},
		{value.Uint16, 0xFED4, uint64(65236)},
		{value.Int16, 0x7FFF, int64(32767)},
		{value.Int16, 0x8000, int64(-32768)},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			s := mustSpec(t, "HR10", tt.typ, "")
			v, err := decodeRegisters(s, regs(tt.reg))
			if err != nil {
				t.Fatal(err)
			}
			if v != tt.want {
				t.Errorf("decode %s 0x%04X = %v, want %v", tt.typ, tt.reg, v, tt.want)
			}
			enc, err := encodeRegisters(s, tt.want)
			if err != nil || string(enc) != string(regs(tt.reg)) {
				t.Errorf("encode %v = % X, %v; want % X", tt.want, enc, err, regs(tt.reg))
			}
		})
	}
	if v, _ := decodeRegisters(mustSpec(t, "HR11", value.Int16, ""), regs(0xFED4)); float64(v.(int64))*0.1 != -30.0 {
		t.Errorf("int16 0xFED4 scaled by 0.1 = %v, want -30.0", float64(v.(int64))*0.1)
	}
}

func TestEncodeRegisters_C03WriteNegativeInt16(t *testing.T) {
	s := mustSpec(t, "HR10", value.Int16, "")
	cv, err := value.Coerce(value.Int16, -20)
	if err != nil {
		t.Fatalf("Coerce(int16, -20): %v (must not be rejected as out of range 0..65535)", err)
	}
	enc, err := encodeRegisters(s, cv)
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != "\xFF\xEC" {
		t.Errorf("encode int16 -20 = % X, want FF EC", enc)
	}
}

func TestDecodeRegisters_64BitOrders(t *testing.T) {
	// float64 1.5 = 0x3FF8000000000000; uint64 0x0102030405060708.
	tests := []struct {
		order string
		u     []byte
		f     []byte
	}{
		{"ABCD", regs(0x0102, 0x0304, 0x0506, 0x0708), regs(0x3FF8, 0, 0, 0)},
		{"CDAB", regs(0x0708, 0x0506, 0x0304, 0x0102), regs(0, 0, 0, 0x3FF8)}, // GHEFCDAB
		{"BADC", regs(0x0201, 0x0403, 0x0605, 0x0807), regs(0xF83F, 0, 0, 0)}, // BADCFEHG
		{"DCBA", regs(0x0807, 0x0605, 0x0403, 0x0201), regs(0, 0, 0, 0xF83F)}, // HGFEDCBA
	}
	for _, tt := range tests {
		t.Run(tt.order, func(t *testing.T) {
			su := mustSpec(t, "HR0", value.Uint64, tt.order)
			if v, err := decodeRegisters(su, tt.u); err != nil || v != any(uint64(0x0102030405060708)) {
				t.Errorf("uint64 %s = %#x, %v", tt.order, v, err)
			}
			if enc, _ := encodeRegisters(su, uint64(0x0102030405060708)); string(enc) != string(tt.u) {
				t.Errorf("encode uint64 %s = % X, want % X", tt.order, enc, tt.u)
			}
			sf := mustSpec(t, "HR0", value.Float64, tt.order)
			if v, err := decodeRegisters(sf, tt.f); err != nil || v != any(1.5) {
				t.Errorf("float64 %s = %v, %v", tt.order, v, err)
			}
			si := mustSpec(t, "HR0", value.Int64, tt.order)
			enc, _ := encodeRegisters(si, int64(-2))
			if v, err := decodeRegisters(si, enc); err != nil || v != any(int64(-2)) {
				t.Errorf("int64 round trip %s = %v, %v", tt.order, v, err)
			}
		})
	}
	// The 64-bit spellings name the same orders.
	for long, short := range map[string]ByteOrder{"ABCDEFGH": ABCD, "GHEFCDAB": CDAB, "BADCFEHG": BADC, "HGFEDCBA": DCBA} {
		if o, err := ParseByteOrder(long); err != nil || o != short {
			t.Errorf("ParseByteOrder(%q) = %v, %v; want %v", long, o, err, short)
		}
	}
}

func TestDecodeRegisters_16BitByteSwap(t *testing.T) {
	for _, order := range []string{"BADC", "DCBA"} {
		if v, _ := decodeRegisters(mustSpec(t, "HR0", value.Int16, order), regs(0xECFF)); v != any(int64(-20)) {
			t.Errorf("int16 %s 0xECFF = %v, want -20", order, v)
		}
	}
	if v, _ := decodeRegisters(mustSpec(t, "HR0", value.Uint16, "CDAB"), regs(0x1234)); v != any(uint64(0x1234)) {
		t.Errorf("uint16 CDAB = %v, want 0x1234 (no word swap in one register)", v)
	}
}

func TestDecodeRegisters_StringAndBit(t *testing.T) {
	s := mustSpec(t, "HR100:4", value.String, "")
	raw := regs('H'<<8|'e', 'l'<<8|'l', 'o'<<8, 0)
	if v, err := decodeRegisters(s, raw); err != nil || v != any("Hello") {
		t.Errorf("string = %q, %v; want Hello (first char in the high byte, NULs trimmed)", v, err)
	}
	enc, err := encodeRegisters(s, "Hello")
	if err != nil || string(enc) != string(raw) {
		t.Errorf("encode string = % X, %v; want % X", enc, err, raw)
	}
	if _, err := encodeRegisters(s, "Hello, world"); !errors.Is(err, value.ErrOutOfRange) {
		t.Errorf("encode too long string: %v, want ErrOutOfRange", err)
	}
	swapped := mustSpec(t, "HR100:1", value.String, "BADC")
	if v, _ := decodeRegisters(swapped, regs('i'<<8|'H')); v != any("Hi") {
		t.Errorf("string BADC = %q, want Hi", v)
	}
	if v, _ := decodeRegisters(mustSpec(t, "HR100:1", value.String, ""), regs(0xFFFE)); v != any("\uFFFD") {
		t.Errorf("invalid UTF-8 = %q, want one replacement character", v)
	}
	for bit, want := range map[int]bool{0: true, 1: false, 3: true, 15: true, 14: false} {
		a := Address{Table: HoldingRegister, Offset: 1, Bit: bit}
		s, err := newSpec(a, value.Bool, "")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := decodeRegisters(s, regs(0x8009)); err != nil || v != any(want) {
			t.Errorf("bit %d of 0x8009 = %v, %v; want %v", bit, v, err, want)
		}
	}
	if v, err := decodeBit([]byte{0x05, 0x80}, 15); err != nil || !v {
		t.Errorf("decodeBit 15 = %v, %v; want true", v, err)
	}
	if _, err := decodeBit([]byte{0x05}, 8); err == nil {
		t.Error("decodeBit past the data: want an error")
	}
}

func TestDecodeRegisters_ShortInput(t *testing.T) {
	if _, err := decodeRegisters(mustSpec(t, "HR0", value.Float32, ""), regs(1)); err == nil {
		t.Error("float32 from one register: want an error")
	}
}

func TestNewSpec_TypeAddressMismatch(t *testing.T) {
	tests := []struct {
		addr  string
		typ   value.Type
		order string
	}{
		{"CO1", value.Int16, ""},
		{"DI1", value.Float32, ""},
		{"HR1.2", value.Int16, ""},
		{"HR1:4", value.Int16, ""},
		{"HR1", value.String, ""},
		{"HR1", value.Bool, ""},
		{"HR1", value.Auto, ""},
		{"HR1", value.TypeUnknown, ""},
		{"HR65535", value.Float32, ""},
		{"HR1", value.Float32, "XYZW"},
	}
	for _, tt := range tests {
		t.Run(tt.addr+" "+tt.typ.String(), func(t *testing.T) {
			a, err := ParseAddress(tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newSpec(a, tt.typ, tt.order); err == nil {
				t.Errorf("newSpec(%s, %s, %q) = nil error", tt.addr, tt.typ, tt.order)
			}
		})
	}
}
