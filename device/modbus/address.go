package modbus

import (
	"fmt"
	"strconv"
	"strings"
)

// Table is one of the four Modbus data tables (Modbus Application Protocol
// V1.1b3 §4.3).
type Table uint8

// The data tables. The zero Table is not valid.
const (
	Coil            Table = iota + 1 // read/write bits, FC1 read, FC5/FC15 write
	DiscreteInput                    // read-only bits, FC2
	InputRegister                    // read-only 16-bit registers, FC4
	HoldingRegister                  // read/write 16-bit registers, FC3, FC6/FC16 write
)

// prefix returns the zero-based notation prefix of t ("HR").
func (t Table) prefix() string {
	switch t {
	case Coil:
		return "CO"
	case DiscreteInput:
		return "DI"
	case InputRegister:
		return "IR"
	case HoldingRegister:
		return "HR"
	}
	return "??"
}

// modiconDigit is the leading digit of the Modicon notation of t.
func (t Table) modiconDigit() byte {
	switch t {
	case Coil:
		return '0'
	case DiscreteInput:
		return '1'
	case InputRegister:
		return '3'
	case HoldingRegister:
		return '4'
	}
	return '?'
}

// readFunction is the function code that reads t.
func (t Table) readFunction() byte {
	switch t {
	case Coil:
		return 1
	case DiscreteInput:
		return 2
	case InputRegister:
		return 4
	case HoldingRegister:
		return 3
	}
	return 0
}

// IsBits reports whether t holds single bits (coils, discrete inputs).
func (t Table) IsBits() bool { return t == Coil || t == DiscreteInput }

// Writable reports whether the Modbus data model allows writes to t.
func (t Table) Writable() bool { return t == Coil || t == HoldingRegister }

// MaxStringRegisters is the longest string address, in registers: the most
// that one FC16 write carries (Modbus Application Protocol §6.12: 123).
const MaxStringRegisters = 123

// Address is a parsed Modbus tag address (docs/modbus.md, Tags and addresses).
// Offset is the zero-based PDU address sent on the wire. Bit is the bit in a
// register (0 = least significant) or -1. Length is the string length in
// registers, or 0 for a non-string address.
type Address struct {
	Table  Table
	Offset uint16
	Bit    int
	Length int
}

// ParseAddress parses a tag address in one of the notations of docs/modbus.md
// (Tags and addresses):
//
//   - zero-based: HR100, IR100, CO100, DI100 (PDU address 0..65535; the
//     prefix is case-insensitive);
//   - Modicon one-based, 5 digits: 40101 (= HR100), 30001, 10001, 00001
//     (register number 1..9999);
//   - Modicon one-based, 6 digits: 400101, 300001, 100001, 000001 (register
//     number 1..65536, so 465536 is HR65535);
//
// each optionally followed by ".B" (bit B, 0..15, of a holding or input
// register; the tag is a bool) or ":N" (a string of N registers, 1..123, the
// first character in the high byte). 40000, 30000, 00000 and 6-digit numbers
// beyond 465536 are errors (docs/modbus.md, fault C04). The error names the address
// text.
func ParseAddress(s string) (Address, error) {
	a, err := parseAddress(strings.TrimSpace(s))
	if err != nil {
		return Address{}, fmt.Errorf("modbus address %q: %w", s, err)
	}
	return a, nil
}

func parseAddress(s string) (Address, error) {
	a := Address{Bit: -1}
	base, suffix, sep := s, "", byte(0)
	if i := strings.IndexAny(s, ".:"); i >= 0 {
		base, suffix, sep = s[:i], s[i+1:], s[i]
	}
	if base == "" {
		return a, fmt.Errorf("empty address")
	}
	if strings.Trim(base, "0123456789") == "" {
		if err := parseModicon(base, &a); err != nil {
			return a, err
		}
	} else {
		if err := parsePrefixed(base, &a); err != nil {
			return a, err
		}
	}
	switch sep {
	case '.':
		if a.Table.IsBits() {
			return a, fmt.Errorf("a bit (.%s) applies to registers only, not to %s", suffix, tableName(a.Table))
		}
		b, err := strconv.Atoi(suffix)
		if err != nil || !isDigits(suffix) || b < 0 || b > 15 {
			return a, fmt.Errorf("bit %q: want 0..15", suffix)
		}
		a.Bit = b
	case ':':
		if a.Table.IsBits() {
			return a, fmt.Errorf("a string length (:%s) applies to registers only, not to %s", suffix, tableName(a.Table))
		}
		n, err := strconv.Atoi(suffix)
		if err != nil || !isDigits(suffix) || n < 1 || n > MaxStringRegisters {
			return a, fmt.Errorf("string length %q: want 1..%d registers", suffix, MaxStringRegisters)
		}
		if int(a.Offset)+n > 65536 {
			return a, fmt.Errorf("string of %d registers runs past register 65535", n)
		}
		a.Length = n
	}
	return a, nil
}

func parseModicon(s string, a *Address) error {
	if len(s) != 5 && len(s) != 6 {
		return fmt.Errorf("a Modicon reference has 5 or 6 digits (40001, 400001), got %d", len(s))
	}
	switch s[0] {
	case '0':
		a.Table = Coil
	case '1':
		a.Table = DiscreteInput
	case '3':
		a.Table = InputRegister
	case '4':
		a.Table = HoldingRegister
	default:
		return fmt.Errorf("a Modicon reference starts with 0, 1, 3 or 4, not %c", s[0])
	}
	n, _ := strconv.Atoi(s[1:]) // digits only, at most 5 of them
	hi := 9999
	if len(s) == 6 {
		hi = 65536
	}
	if n < 1 || n > hi {
		return fmt.Errorf("register number %d out of range 1..%d (Modicon references are one-based)", n, hi)
	}
	a.Offset = uint16(n - 1)
	return nil
}

func parsePrefixed(s string, a *Address) error {
	if len(s) < 3 {
		return fmt.Errorf("want HR, IR, CO or DI and a number, or a Modicon reference such as 40001")
	}
	switch strings.ToUpper(s[:2]) {
	case "HR":
		a.Table = HoldingRegister
	case "IR":
		a.Table = InputRegister
	case "CO":
		a.Table = Coil
	case "DI":
		a.Table = DiscreteInput
	default:
		return fmt.Errorf("want HR, IR, CO or DI and a number, or a Modicon reference such as 40001")
	}
	num := s[2:]
	n, err := strconv.Atoi(num)
	if err != nil || !isDigits(num) || n < 0 || n > 65535 {
		return fmt.Errorf("PDU address %q: want 0..65535 (zero-based)", num)
	}
	a.Offset = uint16(n)
	return nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func tableName(t Table) string {
	switch t {
	case Coil:
		return "coils"
	case DiscreteInput:
		return "discrete inputs"
	case InputRegister:
		return "input registers"
	case HoldingRegister:
		return "holding registers"
	}
	return "an unknown table"
}

func (a Address) suffix() string {
	switch {
	case a.Bit >= 0:
		return "." + strconv.Itoa(a.Bit)
	case a.Length > 0:
		return ":" + strconv.Itoa(a.Length)
	}
	return ""
}

// String returns the zero-based notation of a ("HR100", "HR100.3",
// "HR100:10").
func (a Address) String() string {
	return a.Table.prefix() + strconv.Itoa(int(a.Offset)) + a.suffix()
}

// Modicon returns the one-based Modicon notation of a: 5 digits when the
// register number fits (40101), else 6 digits (465536), so that users can
// compare with vendor sheets (docs/modbus.md, fault C04).
func (a Address) Modicon() string {
	n := int(a.Offset) + 1
	if n <= 9999 {
		return fmt.Sprintf("%c%04d%s", a.Table.modiconDigit(), n, a.suffix())
	}
	return fmt.Sprintf("%c%05d%s", a.Table.modiconDigit(), n, a.suffix())
}
