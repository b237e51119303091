package rpc

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Binary result frames (daemon → worker only). A successful answer to a
// call may be sent as a binary frame instead of JSON: the same 4-byte
// length, then a body in a subset of Python's pickle protocol 4 that
// CPython's C unpickler (_pickle.loads) decodes in a fraction of what
// json.loads costs (bench/README.md, "The script call floor"). The body is
// one tuple (exec, id, value) and begins with the PROTO opcode 0x80, which
// no JSON frame does ('{'). Only the opcodes of None, bool, int, float,
// str, list, tuple and dict are written: no GLOBAL, REDUCE or other opcode
// that imports or calls anything. The worker's own frames stay JSON and are
// validated as before; nothing in this direction is read by the daemon.
//
// marshal was measured too: marshal.loads raises the audit event
// "marshal.loads" with a copy of its input, which the worker's audit hook
// (docs/security.md, "The script sandbox") pays for on every call, and
// pickle.loads raises none.

// The pickle opcodes of the subset (CPython Lib/pickletools.py).
const (
	opProto      = 0x80
	opStop       = '.'
	opNone       = 'N'
	opTrue       = 0x88
	opFalse      = 0x89
	opBinInt     = 'J'  // 4-byte signed little-endian
	opLong1      = 0x8a // 1-byte length, little-endian two's complement
	opBinFloat   = 'G'  // 8-byte big-endian IEEE 754
	opShortUni   = 0x8c // 1-byte length, UTF-8
	opBinUnicode = 'X'  // 4-byte little-endian length, UTF-8
	opMark       = '('
	opEmptyList  = ']'
	opAppends    = 'e'
	opEmptyDict  = '}'
	opSetItems   = 'u'
	opTuple      = 't'
	opTuple3     = 0x87
)

// PickleProto is the start of every binary frame body: PROTO 4.
const PickleProto = "\x80\x04"

// Pickle appends values in the pickle subset to a byte slice. A list is
// BeginList, its items, EndList; a tuple BeginTuple … EndTuple; a dict
// BeginDict, key and value alternately, EndDict. The zero value is ready to
// use. It does not check that begins and ends pair: the encoder's users
// are tested against CPython (rpc's and sandbox's tests).
type Pickle struct {
	B []byte
}

// None appends None.
func (p *Pickle) None() { p.B = append(p.B, opNone) }

// Bool appends True or False.
func (p *Pickle) Bool(v bool) {
	if v {
		p.B = append(p.B, opTrue)
	} else {
		p.B = append(p.B, opFalse)
	}
}

// Int appends an int (exact).
func (p *Pickle) Int(v int64) {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		p.B = append(p.B, opBinInt)
		p.B = binary.LittleEndian.AppendUint32(p.B, uint32(int32(v)))
		return
	}
	p.B = append(p.B, opLong1, 8)
	p.B = binary.LittleEndian.AppendUint64(p.B, uint64(v))
}

// Uint appends an int (exact; above MaxInt64 as 9 bytes, the last 0 so it
// stays positive).
func (p *Pickle) Uint(v uint64) {
	if v <= math.MaxInt64 {
		p.Int(int64(v))
		return
	}
	p.B = append(p.B, opLong1, 9)
	p.B = binary.LittleEndian.AppendUint64(p.B, v)
	p.B = append(p.B, 0)
}

// Float appends a float, NaN and the infinities included.
func (p *Pickle) Float(v float64) {
	p.B = append(p.B, opBinFloat)
	p.B = binary.BigEndian.AppendUint64(p.B, math.Float64bits(v))
}

// String appends a str. Invalid UTF-8 becomes U+FFFD, one per bad byte, as
// encoding/json writes it (the JSON answers of the same value read the
// same in Python).
func (p *Pickle) String(s string) {
	if !utf8.ValidString(s) {
		s = fixUTF8(s)
	}
	if len(s) < 256 {
		p.B = append(p.B, opShortUni, byte(len(s)))
	} else {
		p.B = append(p.B, opBinUnicode)
		p.B = binary.LittleEndian.AppendUint32(p.B, uint32(len(s)))
	}
	p.B = append(p.B, s...)
}

func fixUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// BeginList starts a list.
func (p *Pickle) BeginList() { p.B = append(p.B, opEmptyList, opMark) }

// EndList ends the list begun last.
func (p *Pickle) EndList() { p.B = append(p.B, opAppends) }

// BeginTuple starts a tuple.
func (p *Pickle) BeginTuple() { p.B = append(p.B, opMark) }

// EndTuple ends the tuple begun last.
func (p *Pickle) EndTuple() { p.B = append(p.B, opTuple) }

// BeginDict starts a dict.
func (p *Pickle) BeginDict() { p.B = append(p.B, opEmptyDict, opMark) }

// EndDict ends the dict begun last.
func (p *Pickle) EndDict() { p.B = append(p.B, opSetItems) }

// Value appends v: nil, bool, int, int64, uint64, float64, string, []any
// or map[string]any (nested to at most 100 levels). Any other type is an
// error and nothing of v is appended.
func (p *Pickle) Value(v any) error {
	n := len(p.B)
	if err := p.value(v, 0); err != nil {
		p.B = p.B[:n]
		return err
	}
	return nil
}

func (p *Pickle) value(v any, depth int) error {
	if depth > 100 {
		return fmt.Errorf("rpc: pickle: nested deeper than 100")
	}
	switch x := v.(type) {
	case nil:
		p.None()
	case bool:
		p.Bool(x)
	case int:
		p.Int(int64(x))
	case int64:
		p.Int(x)
	case uint64:
		p.Uint(x)
	case float64:
		p.Float(x)
	case string:
		p.String(x)
	case []any:
		p.BeginList()
		for _, e := range x {
			if err := p.value(e, depth+1); err != nil {
				return err
			}
		}
		p.EndList()
	case map[string]any:
		p.BeginDict()
		for k, e := range x {
			p.String(k)
			if err := p.value(e, depth+1); err != nil {
				return err
			}
		}
		p.EndDict()
	default:
		return fmt.Errorf("rpc: pickle: %T is not a value of the subset", v)
	}
	return nil
}

// appendBinaryResult appends the body of a binary result frame: PROTO 4,
// the tuple (exec, id, value) and STOP; value is already encoded.
func appendBinaryResult(b []byte, exec string, id int64, value []byte) []byte {
	p := Pickle{B: append(b, PickleProto...)}
	p.String(exec)
	p.Int(id)
	p.B = append(p.B, value...)
	return append(p.B, opTuple3, opStop)
}
