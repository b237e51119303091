package modbus

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"qubiq.dev/edge/value"
)

// ByteOrder is the order of the bytes of a multi-register value on the wire
// (docs/modbus.md, Tags and addresses). For 32-bit values A is the most
// significant byte; for 64-bit values the same four names mean ABCDEFGH,
// GHEFCDAB, BADCFEHG and HGFEDCBA. For 16-bit values and strings only the
// byte swap matters: BADC and DCBA swap the two bytes of each register.
type ByteOrder uint8

// The byte orders. ABCD (big-endian, the Modbus default) is the zero value.
const (
	ABCD ByteOrder = iota // big-endian
	CDAB                  // word swap
	BADC                  // byte swap within each register
	DCBA                  // little-endian
)

// ParseByteOrder parses "ABCD", "CDAB", "BADC" or "DCBA" (case-insensitive;
// "" is ABCD, and the 64-bit spellings ABCDEFGH, GHEFCDAB, BADCFEHG, HGFEDCBA
// are accepted too). The error names s.
func ParseByteOrder(s string) (ByteOrder, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "ABCD", "ABCDEFGH":
		return ABCD, nil
	case "CDAB", "GHEFCDAB":
		return CDAB, nil
	case "BADC", "BADCFEHG":
		return BADC, nil
	case "DCBA", "HGFEDCBA":
		return DCBA, nil
	}
	return ABCD, fmt.Errorf("byte order %q: want ABCD, CDAB, BADC or DCBA", s)
}

// String returns the name of o ("CDAB").
func (o ByteOrder) String() string {
	switch o {
	case ABCD:
		return "ABCD"
	case CDAB:
		return "CDAB"
	case BADC:
		return "BADC"
	case DCBA:
		return "DCBA"
	}
	return fmt.Sprintf("ByteOrder(%d)", uint8(o))
}

func (o ByteOrder) wordSwap() bool { return o == CDAB || o == DCBA }
func (o ByteOrder) byteSwap() bool { return o == BADC || o == DCBA }

// spec is a point after CheckPoint: where it lives and how to decode it.
// lowFirst and enc apply to strings only.
type spec struct {
	addr     Address
	typ      value.Type
	order    ByteOrder
	lowFirst bool     // a register string's first character is in the low byte
	enc      encoding // a register string's character encoding
}

// encoding is the character encoding of a register string (tag key
// encoding: ascii, latin1, utf8).
type encoding uint8

const (
	encUTF8   encoding = iota // UTF-8 (RFC 3629); ASCII text is UTF-8 too
	encASCII                  // 7-bit US-ASCII
	encLatin1                 // ISO/IEC 8859-1: each byte is the code point
)

// String options of a tag (docs/modbus.md, Tags and addresses: "the first
// character in the high byte"; docs/values.md, Strings from registers).
const (
	StringHighFirst = "high" // the first character of each register in its high byte (default)
	StringLowFirst  = "low"  // the first character in the low byte
	EncodingUTF8    = "utf8"
	EncodingASCII   = "ascii"
	EncodingLatin1  = "latin1"
)

// ParseEncoding parses a string tag's encoding ("" is utf8).
func ParseEncoding(s string) (encoding, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", EncodingUTF8, "utf-8":
		return encUTF8, nil
	case EncodingASCII, "us-ascii":
		return encASCII, nil
	case EncodingLatin1, "iso-8859-1", "latin-1":
		return encLatin1, nil
	}
	return encUTF8, fmt.Errorf("encoding %q: want ascii, latin1 or utf8", s)
}

// withStrings sets a string point's byte order within registers (sbo:
// "high", "low" or "" for the default, which byte_order BADC/DCBA also
// turns to low-first, as before string_byte_order existed) and encoding.
// Both options are refused on a point that is not a string.
func (s spec) withStrings(sbo, enc string) (spec, error) {
	if s.typ != value.String {
		if sbo != "" || enc != "" {
			return s, fmt.Errorf("string_byte_order and encoding apply to string tags only, not %s", s.typ)
		}
		return s, nil
	}
	var err error
	if s.enc, err = ParseEncoding(enc); err != nil {
		return s, err
	}
	s.lowFirst = s.order.byteSwap()
	switch strings.ToLower(strings.TrimSpace(sbo)) {
	case "":
	case StringHighFirst, StringLowFirst:
		if s.order != ABCD {
			return s, fmt.Errorf("string_byte_order %q with byte_order %s: on a string tag set string_byte_order only", sbo, s.order)
		}
		s.lowFirst = strings.EqualFold(strings.TrimSpace(sbo), StringLowFirst)
	default:
		return s, fmt.Errorf("string_byte_order %q: want high or low", sbo)
	}
	return s, nil
}

// registers is how many registers (or bits, for coils and discrete inputs)
// the point covers.
func (s spec) registers() int {
	switch {
	case s.addr.Table.IsBits(), s.addr.Bit >= 0:
		return 1
	case s.addr.Length > 0:
		return s.addr.Length
	}
	return s.typ.Registers()
}

// newSpec checks that address a, type t and byte order o go together.
func newSpec(a Address, t value.Type, order string) (spec, error) {
	o, err := ParseByteOrder(order)
	if err != nil {
		return spec{}, err
	}
	s := spec{addr: a, typ: t, order: o, lowFirst: o.byteSwap()}
	switch {
	case a.Table.IsBits():
		if t != value.Bool {
			return s, fmt.Errorf("%s holds bits: type must be bool, not %s", tableName(a.Table), t)
		}
	case a.Bit >= 0:
		if t != value.Bool {
			return s, fmt.Errorf("a register bit (.%d) is a bool, not %s", a.Bit, t)
		}
	case a.Length > 0:
		if t != value.String {
			return s, fmt.Errorf("a string address (:%d) needs type string, not %s", a.Length, t)
		}
	case t == value.String:
		return s, fmt.Errorf("type string needs a length in registers, such as %s:10", a)
	case t == value.Bool:
		return s, fmt.Errorf("type bool on a register needs a bit, such as %s.0", a)
	case t.Registers() == 0:
		return s, fmt.Errorf("type %s is not supported by modbus (want bool, int16, uint16, int32, uint32, int64, uint64, float32, float64 or string)", t)
	}
	if int(a.Offset)+s.registers() > 65536 {
		return s, fmt.Errorf("%s of %d registers at %s runs past register 65535", t, s.registers(), a)
	}
	return s, nil
}

// reorder reorders the canonical big-endian bytes b (A first) into the byte
// sequence of the registers on the wire for order o, or back: the mapping is
// its own inverse.
func reorder(b []byte, o ByteOrder) []byte {
	return reorderInto(make([]byte, len(b)), b, o)
}

// reorderInto is reorder into out (len(b) long), which it returns.
func reorderInto(out, b []byte, o ByteOrder) []byte {
	copy(out, b)
	if o.wordSwap() && len(out) > 2 {
		n := len(out) / 2
		for i := 0; i < n/2; i++ {
			j := n - 1 - i
			out[2*i], out[2*i+1], out[2*j], out[2*j+1] = out[2*j], out[2*j+1], out[2*i], out[2*i+1]
		}
	}
	if o.byteSwap() {
		for i := 0; i+1 < len(out); i += 2 {
			out[i], out[i+1] = out[i+1], out[i]
		}
	}
	return out
}

// decodeRegisters turns the raw register bytes of one point (2 bytes per
// register, as they came on the wire) into its value: int64 for signed
// types, uint64 for unsigned, float64 for floats (a float32 keeps float32
// precision: 28.094512939453125), bool for a register bit, string for a
// string (ending at the first NUL, in the point's byte order and encoding,
// undecodable bytes as U+FFFD). It fails when raw is shorter than the point.
func decodeRegisters(s spec, raw []byte) (value.Value, error) {
	if len(raw) < 2*s.registers() {
		return nil, fmt.Errorf("decode %s: %d bytes, want %d", s.typ, len(raw), 2*s.registers())
	}
	raw = raw[:2*s.registers()]
	if s.addr.Bit >= 0 {
		return binary.BigEndian.Uint16(raw)>>uint(s.addr.Bit)&1 == 1, nil
	}
	if s.typ == value.String {
		b := raw
		if s.lowFirst {
			b = reorder(raw, BADC)
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i] // a device string ends at its first NUL; what follows is not text
		}
		return decodeText(b, s.enc), nil
	}
	var buf [8]byte // numbers are at most 4 registers
	b := raw
	if s.order != ABCD {
		b = reorderInto(buf[:len(raw)], raw, s.order)
	}
	switch s.typ {
	case value.Int16:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case value.Uint16:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case value.Int32:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case value.Uint32:
		return uint64(binary.BigEndian.Uint32(b)), nil
	case value.Int64:
		return int64(binary.BigEndian.Uint64(b)), nil
	case value.Uint64:
		return binary.BigEndian.Uint64(b), nil
	case value.Float32:
		return value.Float32Decimal(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case value.Float64:
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	}
	return nil, fmt.Errorf("decode: type %s not supported", s.typ)
}

// registerKey is the raw register bytes of a number (at most 4
// registers) as one integer, and whether s is a number whose value
// decodeRegisters computes from them alone (not a string or a register
// bit, and raw long enough): two equal keys decode to the same value.
func registerKey(s spec, raw []byte) (uint64, bool) {
	n := 2 * s.typ.Registers()
	if s.addr.Bit >= 0 || s.addr.Length > 0 || n == 0 || n > 8 || len(raw) < n {
		return 0, false
	}
	var k uint64
	for _, c := range raw[:n] {
		k = k<<8 | uint64(c)
	}
	return k, true
}

// encodeRegisters turns v, already coerced to s.typ by value.Coerce, into the
// register bytes to write (2 bytes per register, wire order). A string longer
// than the address's length wraps value.ErrOutOfRange; a shorter one is
// padded with NULs. It is the inverse of decodeRegisters (docs/modbus.md, "Faults from the field"
// C03: int16 -20 is 0xFFEC). Register bits are not encoded here: they are a
// read-modify-write (see Driver.Write).
func encodeRegisters(s spec, v value.Value) ([]byte, error) {
	if s.typ == value.String {
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %v is not a string", value.ErrTypeMismatch, v)
		}
		text, err := encodeText(str, s.enc)
		if err != nil {
			return nil, err
		}
		if len(text) > 2*s.addr.Length {
			return nil, fmt.Errorf("%w: string of %d bytes does not fit %d registers", value.ErrOutOfRange, len(text), s.addr.Length)
		}
		b := make([]byte, 2*s.addr.Length) // the rest of the field is NUL-filled
		copy(b, text)
		if s.lowFirst {
			b = reorder(b, BADC)
		}
		return b, nil
	}
	b := make([]byte, 2*s.typ.Registers())
	switch s.typ {
	case value.Int16, value.Int32, value.Int64:
		x, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: %v is not an int64", value.ErrTypeMismatch, v)
		}
		switch s.typ {
		case value.Int16:
			binary.BigEndian.PutUint16(b, uint16(int16(x)))
		case value.Int32:
			binary.BigEndian.PutUint32(b, uint32(int32(x)))
		default:
			binary.BigEndian.PutUint64(b, uint64(x))
		}
	case value.Uint16, value.Uint32, value.Uint64:
		x, ok := v.(uint64)
		if !ok {
			return nil, fmt.Errorf("%w: %v is not a uint64", value.ErrTypeMismatch, v)
		}
		switch s.typ {
		case value.Uint16:
			binary.BigEndian.PutUint16(b, uint16(x))
		case value.Uint32:
			binary.BigEndian.PutUint32(b, uint32(x))
		default:
			binary.BigEndian.PutUint64(b, x)
		}
	case value.Float32, value.Float64:
		x, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("%w: %v is not a float64", value.ErrTypeMismatch, v)
		}
		if s.typ == value.Float32 {
			binary.BigEndian.PutUint32(b, math.Float32bits(float32(x)))
		} else {
			binary.BigEndian.PutUint64(b, math.Float64bits(x))
		}
	default:
		return nil, fmt.Errorf("%w: cannot encode %s into registers", value.ErrTypeMismatch, s.typ)
	}
	return reorder(b, s.order), nil
}

// decodeText decodes the bytes of a register string (NUL already cut off)
// in encoding enc; a byte that is not text in enc becomes U+FFFD.
func decodeText(b []byte, enc encoding) string {
	switch enc {
	case encASCII:
		r := latin1Runes(b)
		for i, c := range r {
			if c >= utf8.RuneSelf {
				r[i] = utf8.RuneError
			}
		}
		return string(r)
	case encLatin1:
		return string(latin1Runes(b))
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func latin1Runes(b []byte) []rune {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return r
}

// encodeText encodes str for a register string in encoding enc. A
// character enc cannot hold, and a NUL (which would end the string on the
// device), wrap value.ErrOutOfRange naming the character; invalid UTF-8 in
// str wraps value.ErrTypeMismatch.
func encodeText(str string, enc encoding) ([]byte, error) {
	if !utf8.ValidString(str) {
		return nil, fmt.Errorf("%w: %q is not valid UTF-8", value.ErrTypeMismatch, str)
	}
	if i := strings.IndexByte(str, 0); i >= 0 {
		return nil, fmt.Errorf("%w: a NUL (U+0000) at byte %d would end the string on the device", value.ErrOutOfRange, i)
	}
	switch enc {
	case encASCII, encLatin1:
		limit, name := rune(0x7F), "ASCII"
		if enc == encLatin1 {
			limit, name = 0xFF, "Latin-1"
		}
		out := make([]byte, 0, len(str))
		for _, r := range str {
			if r > limit {
				return nil, fmt.Errorf("%w: character %q (%U) is not %s", value.ErrOutOfRange, r, r, name)
			}
			out = append(out, byte(r))
		}
		return out, nil
	}
	return []byte(str), nil
}

// decodeBit returns bit i of a coil or discrete-input response (LSB of the
// first byte is the first bit, Modbus Application Protocol §6.1).
func decodeBit(raw []byte, i int) (bool, error) {
	if i < 0 || i/8 >= len(raw) {
		return false, fmt.Errorf("decode bit %d: response has %d bytes", i, len(raw))
	}
	return raw[i/8]>>(uint(i)%8)&1 == 1, nil
}
