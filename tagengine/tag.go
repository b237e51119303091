package tagengine

import (
	"fmt"
	"math"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// Tag is one configured tag (docs/project.md, Project file "tags"). Point carries
// what the driver needs; the rest is the engine's.
type Tag struct {
	Path        string
	Device      string
	Point       device.Point
	Scan        time.Duration // scan class period; DefaultScan when zero
	WriteLevel  auth.Level    // LevelNone: the baseline write level
	ReadOnly    bool
	Units       string
	Description string
	Deadband    Deadband
	Scale       Scale
	// History is the tag's history recording policy; nil: not recorded.
	History *HistoryPolicy
	// PassNonFinite keeps NaN and ±Inf readings as Uncertain values (tag
	// option non_finite: pass) and lets them be written. Without it a
	// non-finite reading is Bad_OutOfRange with the last known value, and a
	// non-finite write is refused (docs/values.md).
	PassNonFinite bool
	// Min and Max are the tag's engineering limits, in engineering units
	// (nil: none). A write outside them is refused with Bad_OutOfRange
	// naming the limit, whoever writes (CheckLimits, on the write path);
	// readings are not limited (docs/project.md, "Limits").
	Min, Max *float64
}

// CheckLimits is the one check of a tag's engineering limits: nil when v
// (an engineering value, before scaling; each element of an array) is a
// number within [Min, Max], or not a number at all (the type check refuses
// those); else an error wrapping value.ErrOutOfRange whose text names the
// value and the limit it passes: "150 is above the tag's max of 100".
func (t Tag) CheckLimits(v value.Value) error {
	if t.Min == nil && t.Max == nil {
		return nil
	}
	if arr, ok := v.([]any); ok {
		for i, e := range arr {
			if err := t.CheckLimits(value.Normalize(e)); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
		return nil
	}
	f, ok := number(v)
	if !ok || math.IsNaN(f) {
		return nil
	}
	switch {
	case t.Min != nil && f < *t.Min:
		return fmt.Errorf("%w: %v is below the tag's min of %v (limits %s)", value.ErrOutOfRange, value.Normalize(v), *t.Min, t.limitsText())
	case t.Max != nil && f > *t.Max:
		return fmt.Errorf("%w: %v is above the tag's max of %v (limits %s)", value.ErrOutOfRange, value.Normalize(v), *t.Max, t.limitsText())
	}
	return nil
}

// limitsText is "0 to 100", "at least 0" or "at most 100".
func (t Tag) limitsText() string {
	switch {
	case t.Min != nil && t.Max != nil:
		return fmt.Sprintf("%v to %v", *t.Min, *t.Max)
	case t.Min != nil:
		return fmt.Sprintf("at least %v", *t.Min)
	}
	return fmt.Sprintf("at most %v", *t.Max)
}

// DefaultScan is the scan period of a tag that names none.
const DefaultScan = time.Second

// Deadband suppresses changes of a number smaller than Absolute
// (engineering units) or than Percent of the last value's magnitude. Zero
// values disable it. It applies to numbers only: a bool or string change,
// and any change of kind, always passes, so every state change of a bool
// reaches subscribers and history (the project file refuses a deadband on
// a bool or string tag; an OPC UA auto tag may still turn out to be one).
type Deadband struct {
	Absolute float64
	Percent  float64
}

// Exceeded reports whether the change from old to new passes the deadband.
// Non-numeric values always pass when they differ.
func (d Deadband) Exceeded(old, new value.Value) bool {
	if o, ok := old.(float64); ok {
		if n, ok := new.(float64); ok { // the common case, without Normalize
			if o == n || (math.IsNaN(o) && math.IsNaN(n)) {
				return false
			}
			return d.exceeded(o, n)
		}
	}
	if value.Equal(old, new) {
		return false
	}
	o, ok1 := number(old)
	n, ok2 := number(new)
	if !ok1 || !ok2 {
		return true
	}
	return d.exceeded(o, n)
}

// exceeded is Exceeded for two numbers that differ.
func (d Deadband) exceeded(o, n float64) bool {
	if math.IsNaN(o) || math.IsNaN(n) {
		return true
	}
	diff := math.Abs(n - o)
	if d.Absolute > 0 && diff < d.Absolute {
		return false
	}
	if d.Percent > 0 && diff < math.Abs(o)*d.Percent/100 {
		return false
	}
	return true
}

// number returns v as a float64 when v is a number (an integer or a float;
// never a bool, a string or an array).
func number(v value.Value) (float64, bool) {
	switch value.Normalize(v).(type) {
	case int64, uint64, float64, value.BigInt:
		return value.ToFloat(v)
	}
	return 0, false
}

// Scale is the linear map raw → engineering: eng = raw × Factor + Offset.
// The zero Scale is the identity. docs/project.md's {raw: [lo, hi], eng: [lo, hi]}
// form converts with ScaleFromRanges.
type Scale struct {
	Factor float64
	Offset float64
}

// ScaleFromRanges returns the Scale mapping rawLo..rawHi onto engLo..engHi.
// It fails when the raw range is empty.
func ScaleFromRanges(rawLo, rawHi, engLo, engHi float64) (Scale, error) {
	if rawHi == rawLo {
		return Scale{}, fmt.Errorf("scale: raw range [%v, %v] is empty", rawLo, rawHi)
	}
	f := (engHi - engLo) / (rawHi - rawLo)
	return Scale{Factor: f, Offset: engLo - rawLo*f}, nil
}

func (s Scale) identity() bool { return (s.Factor == 0 || s.Factor == 1) && s.Offset == 0 }

// ToEng maps a raw driver value to engineering units; non-numeric values and
// the identity scale pass through unchanged. Scaled values are float64.
func (s Scale) ToEng(v value.Value) value.Value {
	if s.identity() {
		return v
	}
	switch v.(type) {
	case int64, uint64, float64:
		f, _ := value.ToFloat(v)
		return f*s.factor() + s.Offset
	}
	return v
}

// ToRaw maps an engineering value back to raw for a write. Integer types are
// rounded to the nearest integer afterwards by value.Coerce's caller.
func (s Scale) ToRaw(v value.Value, t value.Type) (value.Value, error) {
	if s.identity() {
		return v, nil
	}
	f, ok := value.ToFloat(v)
	if !ok {
		return nil, fmt.Errorf("%w: %v is not a number", value.ErrTypeMismatch, v)
	}
	raw := (f - s.Offset) / s.factor()
	switch t {
	case value.Float32, value.Float64:
		return raw, nil
	}
	return math.Round(raw), nil
}

func (s Scale) factor() float64 {
	if s.Factor == 0 {
		return 1
	}
	return s.Factor
}
