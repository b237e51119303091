package opcua

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/value"
)

// builtinNames are the names of the built-in types (OPC UA Part 6 §5.1.2,
// Table 1), by type id.
var builtinNames = [...]string{
	"Null", "Boolean", "SByte", "Byte", "Int16", "UInt16", "Int32", "UInt32",
	"Int64", "UInt64", "Float", "Double", "String", "DateTime", "Guid",
	"ByteString", "XmlElement", "NodeId", "ExpandedNodeId", "StatusCode",
	"QualifiedName", "LocalizedText", "ExtensionObject", "DataValue",
	"Variant", "DiagnosticInfo",
}

func builtinName(t ua.TypeID) string {
	if int(t) < len(builtinNames) {
		return builtinNames[t]
	}
	return fmt.Sprintf("type %d", t)
}

// fromVariant maps a variant onto the normalised values of package value:
// Boolean → bool; SByte, Int16, Int32, Int64 → int64; Byte, UInt16, UInt32,
// UInt64 and StatusCode → uint64; Float, Double → float64 (a Float keeps its
// shortest decimal form: 0.1f is 0.1); String, XmlElement → string; DateTime
// → RFC 3339 text in UTC with fractional seconds, decoded from the raw
// ticks ("" for no date, clamped at the OPC UA maximum: dateText); ByteString → standard
// base64; Guid → "72962B91-FA75-4AE6-8D28-B404DC7DAF63"; NodeId,
// ExpandedNodeId → their string form; QualifiedName → "ns:Name";
// LocalizedText → its text; a Variant or DataValue → its value; an
// ExtensionObject that gopcua decodes → its JSON text. Arrays (of any
// dimension) become []any. An ExtensionObject that gopcua cannot decode, and
// DiagnosticInfo, are errors wrapping value.ErrTypeMismatch that name the
// type.
func fromVariant(v *ua.Variant) (value.Value, error) {
	return fromVariantNote(v, nil)
}

// fromVariantNote is fromVariant that also says, in *note (when not nil),
// why the value is not quite what the server sent: a DateTime clamped to
// the OPC UA maximum (docs/values.md).
func fromVariantNote(v *ua.Variant, note *string) (value.Value, error) {
	if v == nil {
		return nil, nil
	}
	return fromGoNote(v.Value(), note)
}

func fromGo(x any) (value.Value, error) { return fromGoNote(x, nil) }

// dateText is the tag value of a DateTime (Part 6 §5.2.2.5, applied by
// dateOf to the ticks gopcua decoded): RFC 3339 in UTC for a date, "" for
// "no date" (0 ticks, the minimum), and the maximum 9999-12-31T23:59:59Z,
// noted, for a value at or beyond it. Never a wrapped date.
func dateText(t time.Time, note *string) string {
	d, kind := dateOf(t)
	switch kind {
	case dateNone:
		return ""
	case dateMax:
		if note != nil && *note == "" {
			*note = "DateTime at or beyond the OPC UA maximum, clamped to 9999-12-31T23:59:59Z (Part 6 §5.2.2.5)"
		}
	}
	return d.Format(time.RFC3339Nano)
}

func fromGoNote(x any, note *string) (value.Value, error) {
	switch t := x.(type) {
	case nil:
		return nil, nil
	case bool:
		return t, nil
	case int8:
		return int64(t), nil
	case int16:
		return int64(t), nil
	case int32:
		return int64(t), nil
	case int64:
		return t, nil
	case uint8:
		return uint64(t), nil
	case uint16:
		return uint64(t), nil
	case uint32:
		return uint64(t), nil
	case uint64:
		return t, nil
	case float32:
		return value.Float32Decimal(t), nil
	case float64:
		return t, nil
	case string:
		return t, nil
	case ua.XMLElement:
		return string(t), nil
	case time.Time:
		return dateText(t, note), nil
	case *ua.GUID:
		if t == nil || len(t.Data4) != 8 {
			return nil, nil
		}
		return t.String(), nil
	case []byte:
		return base64.StdEncoding.EncodeToString(t), nil
	case ua.ByteArray:
		out := make([]any, len(t))
		for i, b := range t {
			out[i] = uint64(b)
		}
		return out, nil
	case *ua.NodeID:
		if t == nil {
			return nil, nil
		}
		return t.String(), nil
	case *ua.ExpandedNodeID:
		if t == nil {
			return nil, nil
		}
		return t.String(), nil
	case ua.StatusCode:
		return uint64(t), nil
	case *ua.QualifiedName:
		if t == nil {
			return nil, nil
		}
		return strconv.Itoa(int(t.NamespaceIndex)) + ":" + t.Name, nil
	case *ua.LocalizedText:
		if t == nil {
			return nil, nil
		}
		return t.Text, nil
	case *ua.Variant:
		return fromVariantNote(t, note)
	case *ua.DataValue:
		if t == nil {
			return nil, nil
		}
		return fromVariantNote(t.Value, note)
	case *ua.ExtensionObject:
		if t == nil {
			return nil, nil
		}
		if t.Value == nil {
			return nil, fmt.Errorf("%w: extension object of type %s is not decodable", value.ErrTypeMismatch, typeIDText(t.TypeID))
		}
		b, err := json.Marshal(t.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: extension object of type %s: %v", value.ErrTypeMismatch, typeIDText(t.TypeID), err)
		}
		return string(b), nil
	case *ua.DiagnosticInfo:
		return nil, fmt.Errorf("%w: DiagnosticInfo has no tag value", value.ErrTypeMismatch)
	}
	rv := reflect.ValueOf(x)
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		out := make([]any, rv.Len())
		for i := range out {
			e, err := fromGoNote(rv.Index(i).Interface(), note)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unsupported value of Go type %T", value.ErrTypeMismatch, x)
}

func typeIDText(id *ua.ExpandedNodeID) string {
	if id == nil || id.NodeID == nil {
		return "(none)"
	}
	return id.NodeID.String()
}

// typeInfo is what a write needs to know about a node: its built-in type,
// whether it holds an array, and whether it may be written (OPC UA Part 3
// §5.6.2: DataType, ValueRank, AccessLevel, UserAccessLevel).
type typeInfo struct {
	builtin  ua.TypeID
	array    bool
	dataType string // the DataType node id, for messages
	writable bool
	reason   string // why builtin is unknown, when it is
}

// subtypes maps the standard subtypes of built-in types (OPC UA Part 3
// §8, Part 5 §12) to their built-in type. Others (enumerations, abstract
// types, vendor types) are learned from the variant of the node's value.
var subtypes = map[uint32]ua.TypeID{
	288:   ua.TypeIDUint32,     // IntegerId
	289:   ua.TypeIDUint32,     // Counter
	290:   ua.TypeIDDouble,     // Duration
	291:   ua.TypeIDString,     // NumericRange
	292:   ua.TypeIDString,     // Time
	293:   ua.TypeIDDateTime,   // Date
	294:   ua.TypeIDDateTime,   // UtcTime
	295:   ua.TypeIDString,     // LocaleId
	311:   ua.TypeIDByteString, // ApplicationInstanceCertificate
	12877: ua.TypeIDString,     // NormalizedString
	12878: ua.TypeIDString,     // DecimalString
	12879: ua.TypeIDString,     // DurationString
	12880: ua.TypeIDString,     // TimeString
	12881: ua.TypeIDString,     // DateString
	20998: ua.TypeIDUint32,     // VersionTime
}

// builtinOf returns the built-in type of a DataType node id, or 0 when the
// current value must tell.
func builtinOf(dt *ua.NodeID) ua.TypeID {
	if dt == nil || dt.Namespace() != 0 {
		return 0
	}
	switch dt.Type() {
	case ua.NodeIDTypeTwoByte, ua.NodeIDTypeFourByte, ua.NodeIDTypeNumeric:
	default:
		return 0
	}
	n := dt.IntID()
	if n >= 1 && n <= 21 {
		return ua.TypeID(n)
	}
	return subtypes[n]
}

// toVariant coerces v (a normalised value, as decoded from JSON or sent by a
// script) to a variant of the node's built-in type. It refuses lossy
// coercions: a fraction for an integer, an integer that a float cannot hold
// exactly, a number for a string, a malformed DateTime, Guid or base64. A
// value outside the type's range wraps value.ErrOutOfRange; every other
// refusal wraps value.ErrTypeMismatch. Both name the value and the type.
func toVariant(ti typeInfo, v value.Value) (*ua.Variant, error) {
	v = value.Normalize(v)
	if ti.builtin == 0 {
		return nil, fmt.Errorf("%w: %s", value.ErrTypeMismatch, ti.reason)
	}
	if !ti.array {
		if _, isArr := v.([]any); isArr {
			return nil, fmt.Errorf("%w: an array for a scalar %s node", value.ErrTypeMismatch, builtinName(ti.builtin))
		}
		x, err := toBuiltin(ti.builtin, v)
		if err != nil {
			return nil, err
		}
		return ua.NewVariant(x)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %v is not an array (the node holds an array of %s)", value.ErrTypeMismatch, v, builtinName(ti.builtin))
	}
	et, ok := goTypes[ti.builtin]
	if !ok {
		return nil, fmt.Errorf("%w: writing arrays of %s is not supported", value.ErrTypeMismatch, builtinName(ti.builtin))
	}
	st := reflect.SliceOf(et)
	if ti.builtin == ua.TypeIDByte {
		st = reflect.TypeOf(ua.ByteArray{})
	}
	out := reflect.MakeSlice(st, len(arr), len(arr))
	for i, e := range arr {
		x, err := toBuiltin(ti.builtin, e)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out.Index(i).Set(reflect.ValueOf(x))
	}
	if ti.builtin == ua.TypeIDByteString {
		// gopcua v0.8.0 encodes [][]byte as a matrix and refuses elements of
		// different lengths ("unbalanced multi-dimensional array").
		for i := 1; i < len(arr); i++ {
			if out.Index(i).Len() != out.Index(0).Len() {
				return nil, fmt.Errorf("%w: arrays of ByteString of different lengths cannot be written (gopcua v0.8.0 encodes them as a matrix)", value.ErrTypeMismatch)
			}
		}
	}
	return ua.NewVariant(out.Interface())
}

var goTypes = map[ua.TypeID]reflect.Type{
	ua.TypeIDBoolean:        reflect.TypeOf(false),
	ua.TypeIDSByte:          reflect.TypeOf(int8(0)),
	ua.TypeIDByte:           reflect.TypeOf(uint8(0)),
	ua.TypeIDInt16:          reflect.TypeOf(int16(0)),
	ua.TypeIDUint16:         reflect.TypeOf(uint16(0)),
	ua.TypeIDInt32:          reflect.TypeOf(int32(0)),
	ua.TypeIDUint32:         reflect.TypeOf(uint32(0)),
	ua.TypeIDInt64:          reflect.TypeOf(int64(0)),
	ua.TypeIDUint64:         reflect.TypeOf(uint64(0)),
	ua.TypeIDFloat:          reflect.TypeOf(float32(0)),
	ua.TypeIDDouble:         reflect.TypeOf(float64(0)),
	ua.TypeIDString:         reflect.TypeOf(""),
	ua.TypeIDDateTime:       reflect.TypeOf(time.Time{}),
	ua.TypeIDGUID:           reflect.TypeOf(new(ua.GUID)),
	ua.TypeIDByteString:     reflect.TypeOf([]byte(nil)),
	ua.TypeIDXMLElement:     reflect.TypeOf(ua.XMLElement("")),
	ua.TypeIDNodeID:         reflect.TypeOf(new(ua.NodeID)),
	ua.TypeIDExpandedNodeID: reflect.TypeOf(new(ua.ExpandedNodeID)),
	ua.TypeIDStatusCode:     reflect.TypeOf(ua.StatusCode(0)),
	ua.TypeIDQualifiedName:  reflect.TypeOf(new(ua.QualifiedName)),
	ua.TypeIDLocalizedText:  reflect.TypeOf(new(ua.LocalizedText)),
}

// maxExact is the largest integer magnitude a float64 holds exactly.
const maxExact = 1 << 53

// toBuiltin coerces one normalised value to the Go type gopcua encodes as
// built-in type t.
func toBuiltin(t ua.TypeID, v value.Value) (any, error) {
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("%w: %v (%T) "+format, append([]any{value.ErrTypeMismatch, v, v}, args...)...)
	}
	switch t {
	case ua.TypeIDBoolean:
		return value.Coerce(value.Bool, v)
	case ua.TypeIDSByte, ua.TypeIDInt16, ua.TypeIDInt32, ua.TypeIDInt64:
		x, err := value.Coerce(value.Int64, v)
		if err != nil {
			return nil, err
		}
		n := x.(int64)
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		switch t {
		case ua.TypeIDSByte:
			lo, hi = math.MinInt8, math.MaxInt8
		case ua.TypeIDInt16:
			lo, hi = math.MinInt16, math.MaxInt16
		case ua.TypeIDInt32:
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if n < lo || n > hi {
			return nil, fmt.Errorf("%w: %d does not fit %s", value.ErrOutOfRange, n, builtinName(t))
		}
		switch t {
		case ua.TypeIDSByte:
			return int8(n), nil
		case ua.TypeIDInt16:
			return int16(n), nil
		case ua.TypeIDInt32:
			return int32(n), nil
		}
		return n, nil
	case ua.TypeIDByte, ua.TypeIDUint16, ua.TypeIDUint32, ua.TypeIDUint64:
		x, err := value.Coerce(value.Uint64, v)
		if err != nil {
			return nil, err
		}
		n := x.(uint64)
		hi := uint64(math.MaxUint64)
		switch t {
		case ua.TypeIDByte:
			hi = math.MaxUint8
		case ua.TypeIDUint16:
			hi = math.MaxUint16
		case ua.TypeIDUint32:
			hi = math.MaxUint32
		}
		if n > hi {
			return nil, fmt.Errorf("%w: %d does not fit %s", value.ErrOutOfRange, n, builtinName(t))
		}
		switch t {
		case ua.TypeIDByte:
			return uint8(n), nil
		case ua.TypeIDUint16:
			return uint16(n), nil
		case ua.TypeIDUint32:
			return uint32(n), nil
		}
		return n, nil
	case ua.TypeIDFloat, ua.TypeIDDouble:
		var f float64
		switch x := v.(type) {
		case int64:
			f = float64(x)
			if (t == ua.TypeIDFloat && float64(float32(f)) != f) || x > maxExact || x < -maxExact {
				return nil, mismatch("is not exactly representable as %s", builtinName(t))
			}
		case uint64:
			f = float64(x)
			if (t == ua.TypeIDFloat && float64(float32(f)) != f) || x > maxExact {
				return nil, mismatch("is not exactly representable as %s", builtinName(t))
			}
		case float64:
			f = x
		default:
			return nil, mismatch("is not a number (%s)", builtinName(t))
		}
		if t == ua.TypeIDFloat {
			if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
				return nil, fmt.Errorf("%w: %v does not fit Float", value.ErrOutOfRange, f)
			}
			return float32(f), nil
		}
		return f, nil
	case ua.TypeIDStatusCode:
		x, err := value.Coerce(value.Uint32, v)
		if err != nil {
			return nil, err
		}
		return ua.StatusCode(x.(uint64)), nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, mismatch("is not a string (%s)", builtinName(t))
	}
	switch t {
	case ua.TypeIDString:
		return s, nil
	case ua.TypeIDXMLElement:
		return ua.XMLElement(s), nil
	case ua.TypeIDLocalizedText:
		return ua.NewLocalizedText(s), nil
	case ua.TypeIDDateTime:
		if s == "" {
			return time.Time{}, nil // no date: 0 ticks (Part 6 §5.2.2.5)
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, mismatch("is not an RFC 3339 date and time (DateTime)")
		}
		if !storable(tm) {
			// gopcua v0.8.0 encodes through int64 nanoseconds (ua.Buffer.WriteTime): it would wrap.
			return nil, fmt.Errorf("%w: DateTime %s is outside 1677-09-21..2262-04-11, which gopcua v0.8.0 cannot encode", value.ErrOutOfRange, s)
		}
		return tm.UTC(), nil
	case ua.TypeIDGUID:
		g := ua.NewGUID(s)
		if g == nil || len(s) != 36 || strings.Count(s, "-") != 4 {
			return nil, mismatch("is not a GUID (8-4-4-4-12 hex digits)")
		}
		return g, nil
	case ua.TypeIDByteString:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, mismatch("is not standard base64 (ByteString)")
		}
		return b, nil
	case ua.TypeIDNodeID:
		id, err := ua.ParseNodeID(s)
		if err != nil {
			return nil, mismatch("is not a node id (ns=<index>;i=|s=|g=|b=)")
		}
		return id, nil
	case ua.TypeIDExpandedNodeID:
		id, err := ua.ParseExpandedNodeID(s, nil)
		if err != nil {
			return nil, mismatch("is not an expanded node id")
		}
		return id, nil
	case ua.TypeIDQualifiedName:
		q := &ua.QualifiedName{Name: s}
		if i := strings.IndexByte(s, ':'); i > 0 {
			if n, err := strconv.ParseUint(s[:i], 10, 16); err == nil {
				q.NamespaceIndex, q.Name = uint16(n), s[i+1:]
			}
		}
		return q, nil
	}
	return nil, fmt.Errorf("%w: writing %s values is not supported", value.ErrTypeMismatch, builtinName(t))
}

// coerceToTag applies the tag's own type to a value read from the device
// (docs/opcua.md, Tags and addresses: auto means the node's DataType decides).
// Arrays are coerced element by element.
func coerceToTag(t value.Type, v value.Value) (value.Value, error) {
	if t == value.Auto || t == value.TypeUnknown || v == nil {
		return v, nil
	}
	if arr, ok := v.([]any); ok {
		out := make([]any, len(arr))
		for i, e := range arr {
			c, err := value.Coerce(t, e)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	}
	return value.Coerce(t, v)
}
