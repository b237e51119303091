package value

import (
	"errors"
	"fmt"
	"math"
)

// CoerceQuality is the one mapping from a refused coercion to the quality a
// caller reports: Bad_OutOfRange when err wraps ErrOutOfRange (OPC UA Part 4
// §7.34: "the value was out of range"), Bad_TypeMismatch for every other
// error (Part 4 §7.34: "the value supplied for the attribute is not of the
// same type as the attribute's value"). Good for nil. The write path, the
// drivers' decoders and the simulator use it alike.
func CoerceQuality(err error) Quality {
	switch {
	case err == nil:
		return Good
	case errors.Is(err, ErrOutOfRange):
		return BadOutOfRange
	}
	return BadTypeMismatch
}

// NonFinite describes the first NaN or infinite float in v ("NaN", "+Inf",
// "-Inf"; "element 3 is NaN" inside an array), or returns "" when v holds
// none. A non-finite number read from equipment is not a Good reading
// (docs/values.md, "Numbers that are not numbers").
func NonFinite(v Value) string {
	switch x := Normalize(v).(type) {
	case float64:
		return nonFiniteName(x)
	case []any:
		for i, e := range x {
			if n := NonFinite(e); n != "" {
				return fmt.Sprintf("element %d is %s", i, n)
			}
		}
	}
	return ""
}

func nonFiniteName(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return ""
}

// Conforms reports whether v is already in the form Coerce(t, ·) returns:
// the normalised Go type of t (bool, int64, uint64, float64, string), inside
// t's range, and for float32 exactly a float32 value. Auto and unknown
// types take any value. Drivers check it instead of coercing a second time:
// the write path coerces once (docs/values.md).
func Conforms(t Type, v Value) bool {
	switch t {
	case Auto, TypeUnknown:
		return true
	case Bool:
		_, ok := v.(bool)
		return ok
	case Int16, Int32, Int64:
		x, ok := v.(int64)
		lo, hi := intRange(t)
		return ok && x >= lo && x <= hi
	case Uint16, Uint32, Uint64:
		x, ok := v.(uint64)
		return ok && x <= uintMax(t)
	case Float32:
		x, ok := v.(float64)
		return ok && isFloat32Value(x)
	case Float64:
		_, ok := v.(float64)
		return ok
	case String:
		_, ok := v.(string)
		return ok
	}
	return false
}
