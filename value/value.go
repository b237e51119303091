// Package value holds the VQT (value, quality, timestamp) that every layer of
// QUBIQ Edge passes around, the quality codes named after OPC UA (Part 4 §7.34,
// Part 8 §6.3.2) and the value kinds a tag may have.
//
// It imports the standard library only; every package of the project may
// import it.
package value

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Quality is the quality of a value. The names are the contract's (docs/project.md,
// Quality), taken from OPC UA status codes. The zero Quality is
// BadWaitingForInitialData, so an unset VQT is never mistaken for Good.
type Quality uint8

// Quality codes. Good first among equals; every Bad* is bad, every Uncertain*
// is uncertain.
const (
	BadWaitingForInitialData Quality = iota
	Good
	Uncertain
	UncertainLastUsableValue
	BadNotConnected
	BadCommunicationError
	BadTimeout
	BadConfigurationError
	BadDeviceFailure
	BadUserAccessDenied
	BadNotWritable
	BadTypeMismatch
	BadOutOfRange
	BadNodeIDUnknown
	BadCertificateUntrusted
	numQualities
)

var qualityNames = [numQualities]string{
	BadWaitingForInitialData: "Bad_WaitingForInitialData",
	Good:                     "Good",
	Uncertain:                "Uncertain",
	UncertainLastUsableValue: "Uncertain_LastUsableValue",
	BadNotConnected:          "Bad_NotConnected",
	BadCommunicationError:    "Bad_CommunicationError",
	BadTimeout:               "Bad_Timeout",
	BadConfigurationError:    "Bad_ConfigurationError",
	BadDeviceFailure:         "Bad_DeviceFailure",
	BadUserAccessDenied:      "Bad_UserAccessDenied",
	BadNotWritable:           "Bad_NotWritable",
	BadTypeMismatch:          "Bad_TypeMismatch",
	BadOutOfRange:            "Bad_OutOfRange",
	BadNodeIDUnknown:         "Bad_NodeIdUnknown",
	BadCertificateUntrusted:  "Bad_CertificateUntrusted",
}

// String returns the contract name of q, such as "Bad_NotConnected".
func (q Quality) String() string {
	if q < numQualities {
		return qualityNames[q]
	}
	return fmt.Sprintf("Quality(%d)", uint8(q))
}

// IsGood reports whether q is Good.
func (q Quality) IsGood() bool { return q == Good }

// IsUncertain reports whether q is one of the Uncertain qualities.
func (q Quality) IsUncertain() bool { return q == Uncertain || q == UncertainLastUsableValue }

// IsBad reports whether q is one of the Bad qualities.
func (q Quality) IsBad() bool { return !q.IsGood() && !q.IsUncertain() }

// ParseQuality returns the Quality named s (the contract name, exactly).
// It returns an error naming s when s is not a quality name.
func ParseQuality(s string) (Quality, error) {
	for i, n := range qualityNames {
		if n == s {
			return Quality(i), nil
		}
	}
	return 0, fmt.Errorf("unknown quality %q", s)
}

// MarshalText encodes q as its contract name.
func (q Quality) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// UnmarshalText decodes a contract name into q.
func (q *Quality) UnmarshalText(b []byte) error {
	v, err := ParseQuality(string(b))
	if err != nil {
		return err
	}
	*q = v
	return nil
}

// Value is a tag value. It holds one of: nil (no value), bool, int64, uint64,
// float64, string, or []any of those. Drivers and decoders normalise into these
// types (Normalize) so that equality and JSON encoding are predictable.
type Value = any

// VQT is a value with its quality and timestamp (UTC). Reason is free text
// saying why the quality is not Good ("illegal data address (exception 2),
// function 0x03"); StatusCode is the raw OPC UA status code where one exists.
type VQT struct {
	Value      Value
	Quality    Quality
	Time       time.Time
	Reason     string
	StatusCode uint32
	// ServerTime is the OPC UA server timestamp (Part 4 §7.7.4) when the
	// value came from a server that sent one; Time is then the source
	// timestamp (§7.7.3), which history uses. Zero for other drivers.
	ServerTime time.Time
}

// Bad returns a VQT with no value, quality q, the reason and the time t.
func Bad(q Quality, reason string, t time.Time) VQT {
	return VQT{Quality: q, Reason: reason, Time: t.UTC()}
}

// Type is a tag's value kind (docs/project.md, Tags and addresses).
type Type uint8

// Value kinds. Auto is OPC UA only: the node's DataType decides.
const (
	TypeUnknown Type = iota
	Bool
	Int16
	Uint16
	Int32
	Uint32
	Int64
	Uint64
	Float32
	Float64
	String
	Auto
)

var typeNames = map[Type]string{
	Bool: "bool", Int16: "int16", Uint16: "uint16", Int32: "int32", Uint32: "uint32",
	Int64: "int64", Uint64: "uint64", Float32: "float32", Float64: "float64",
	String: "string", Auto: "auto",
}

// String returns the contract name of t ("float32").
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "unknown"
}

// ParseType returns the Type named s ("int16", "float32", ...). The error names
// s and lists the valid names.
func ParseType(s string) (Type, error) {
	for t, n := range typeNames {
		if n == strings.ToLower(strings.TrimSpace(s)) {
			return t, nil
		}
	}
	return TypeUnknown, fmt.Errorf("unknown type %q (want bool, int16, uint16, int32, uint32, int64, uint64, float32, float64, string or auto)", s)
}

// MarshalText encodes t as its name.
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText decodes a type name.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Registers returns how many 16-bit registers a value of t takes (0 for bool,
// string and auto, whose size depends on the address).
func (t Type) Registers() int {
	switch t {
	case Int16, Uint16:
		return 1
	case Int32, Uint32, Float32:
		return 2
	case Int64, Uint64, Float64:
		return 4
	}
	return 0
}

// ErrOutOfRange is wrapped by Coerce when a number does not fit the type.
var ErrOutOfRange = fmt.Errorf("out of range")

// ErrTypeMismatch is wrapped by Coerce when a value cannot become the type.
var ErrTypeMismatch = fmt.Errorf("type mismatch")

// Coerce converts v (as decoded from JSON or sent by a script) to the
// normalised Go type for t: bool; int64 for signed integers; uint64 for
// unsigned; float64 for floats; string. A number outside the range of t wraps
// ErrOutOfRange; a fractional number for an integer type, or a value of the
// wrong kind, wraps ErrTypeMismatch. Both errors name the value and the type;
// CoerceQuality maps them to a quality.
func Coerce(t Type, v Value) (Value, error) {
	v = Normalize(v)
	switch t {
	case Bool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			if x == 0 || x == 1 {
				return x == 1, nil
			}
		case uint64:
			if x == 0 || x == 1 {
				return x == 1, nil
			}
		}
		return nil, fmt.Errorf("%w: %s is not a bool", ErrTypeMismatch, show(v))
	case Int16, Int32, Int64:
		lo, hi := intRange(t)
		switch x := v.(type) {
		case BigInt:
			return nil, fmt.Errorf("%w: %s does not fit %s", ErrOutOfRange, string(x), t)
		case int64:
			if x < lo || x > hi {
				return nil, fmt.Errorf("%w: %d does not fit %s", ErrOutOfRange, x, t)
			}
			return x, nil
		case uint64:
			if x > uint64(hi) {
				return nil, fmt.Errorf("%w: %d does not fit %s", ErrOutOfRange, x, t)
			}
			return int64(x), nil
		case float64:
			if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, fmt.Errorf("%w: %s is not an integer (%s)", ErrTypeMismatch, show(x), t)
			}
			if x < float64(lo) || x >= -float64(lo) {
				return nil, fmt.Errorf("%w: %s does not fit %s", ErrOutOfRange, show(x), t)
			}
			if int64(x) > hi {
				return nil, fmt.Errorf("%w: %s does not fit %s", ErrOutOfRange, show(x), t)
			}
			return int64(x), nil
		}
		return nil, fmt.Errorf("%w: %s is not a number (%s)", ErrTypeMismatch, show(v), t)
	case Uint16, Uint32, Uint64:
		hi := uintMax(t)
		switch x := v.(type) {
		case BigInt:
			return nil, fmt.Errorf("%w: %s does not fit %s", ErrOutOfRange, string(x), t)
		case int64:
			if x < 0 || uint64(x) > hi {
				return nil, fmt.Errorf("%w: %d does not fit %s", ErrOutOfRange, x, t)
			}
			return uint64(x), nil
		case uint64:
			if x > hi {
				return nil, fmt.Errorf("%w: %d does not fit %s", ErrOutOfRange, x, t)
			}
			return x, nil
		case float64:
			if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, fmt.Errorf("%w: %s is not an integer (%s)", ErrTypeMismatch, show(x), t)
			}
			if x < 0 || x >= float64(hi)+1 {
				return nil, fmt.Errorf("%w: %s does not fit %s", ErrOutOfRange, show(x), t)
			}
			return uint64(x), nil
		}
		return nil, fmt.Errorf("%w: %s is not a number (%s)", ErrTypeMismatch, show(v), t)
	case Float32, Float64:
		var f float64
		switch x := v.(type) {
		case BigInt:
			f, _ = strconv.ParseFloat(string(x), 64)
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		case float64:
			f = x
		default:
			return nil, fmt.Errorf("%w: %s is not a number (%s)", ErrTypeMismatch, show(v), t)
		}
		if t == Float32 {
			if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
				return nil, fmt.Errorf("%w: %s does not fit float32", ErrOutOfRange, show(f))
			}
			// The value a float32 tag holds is the nearest float32, as
			// its shortest decimal (Float32Decimal).
			f = Float32Decimal(float32(f))
		}
		return f, nil
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("%w: %s is not a string", ErrTypeMismatch, show(v))
	case Auto:
		return v, nil
	}
	return nil, fmt.Errorf("%w: unknown type %s", ErrTypeMismatch, t)
}

// show formats a value for an error message: strings quoted, arrays as
// JSON, nil as null.
func show(v Value) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case []any:
		if b, err := json.Marshal(x); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v)
}

// RangeText is the range of values type t holds, for refusals: "-32768 to
// 32767" for int16, "0 to 65535" for uint16, "±3.4028234663852886e+38" for
// float32 (Coerce's bounds); "" for types without one (bool, string,
// float64, auto).
func RangeText(t Type) string {
	switch t {
	case Int16, Int32, Int64:
		lo, hi := intRange(t)
		return fmt.Sprintf("%d to %d", lo, hi)
	case Uint16, Uint32, Uint64:
		return fmt.Sprintf("0 to %d", uintMax(t))
	case Float32:
		return fmt.Sprintf("±%v", float64(math.MaxFloat32))
	}
	return ""
}

func intRange(t Type) (int64, int64) {
	switch t {
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Int32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func uintMax(t Type) uint64 {
	switch t {
	case Uint16:
		return math.MaxUint16
	case Uint32:
		return math.MaxUint32
	}
	return math.MaxUint64
}

// Normalize maps Go numeric kinds onto int64, uint64 and float64, and
// json.Number onto the narrowest of int64, uint64 or float64 that holds it
// exactly. Other values are returned unchanged.
func Normalize(v Value) Value {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return uint64(x)
	case uint8:
		return uint64(x)
	case uint16:
		return uint64(x)
	case uint32:
		return uint64(x)
	case float32:
		return float64(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if !strings.ContainsAny(string(x), ".eE") {
			if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
				return u
			}
			// An integer literal beyond int64 and uint64: keep it exact
			// so no integer type takes it as its nearest limit.
			return BigInt(x)
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return string(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	}
	return v
}

// BigInt is an integer literal outside both the int64 and uint64 ranges,
// kept as its text by Normalize: Coerce refuses it for every integer type
// with ErrOutOfRange (rather than rounding it to the nearest limit) and
// converts it for float types.
type BigInt string

// MarshalJSON writes the literal as a JSON number.
func (b BigInt) MarshalJSON() ([]byte, error) { return []byte(b), nil }

// Equal reports whether a and b are the same normalised value.
func Equal(a, b Value) bool {
	a, b = Normalize(a), Normalize(b)
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || (math.IsNaN(x) && math.IsNaN(y)))
	}
	return a == b
}

// ToFloat returns v as a float64 and reports whether v is numeric (bools count
// as 0 and 1).
func ToFloat(v Value) (float64, bool) {
	switch x := Normalize(v).(type) {
	case BigInt:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
