package opcua

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/value"
)

func TestFromVariant_Types(t *testing.T) {
	tm := time.Date(2024, 5, 6, 7, 8, 9, 123000000, time.FixedZone("X", 3600))
	for _, tc := range []struct {
		name string
		in   any
		want value.Value
	}{
		{"Boolean", true, true},
		{"SByte", int8(-5), int64(-5)},
		{"Byte", uint8(200), uint64(200)},
		{"Int16", int16(-2), int64(-2)},
		{"UInt16", uint16(2), uint64(2)},
		{"Int32", int32(-3), int64(-3)},
		{"UInt32", uint32(3), uint64(3)},
		{"Int64", int64(math.MinInt64), int64(math.MinInt64)},
		{"UInt64", uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"Float shortest", float32(0.1), 0.1},
		{"Double", 2.5, 2.5},
		{"String", "x", "x"},
		{"DateTime UTC", tm, "2024-05-06T06:08:09.123Z"},
		{"Guid", ua.NewGUID("72962B91-FA75-4AE6-8D28-B404DC7DAF63"), "72962B91-FA75-4AE6-8D28-B404DC7DAF63"},
		{"ByteString", []byte{0, 1, 2, 255}, "AAEC/w=="},
		{"XmlElement", ua.XMLElement("<a/>"), "<a/>"},
		{"NodeId", ua.NewStringNodeID(2, "S"), "ns=2;s=S"},
		{"StatusCode", ua.StatusBadNodeIDUnknown, uint64(0x80340000)},
		{"QualifiedName", &ua.QualifiedName{NamespaceIndex: 1, Name: "Q"}, "1:Q"},
		{"LocalizedText", ua.NewLocalizedTextWithLocale("Pumpe", "de"), "Pumpe"},
		{"Variant", ua.MustVariant(int32(7)), int64(7)},
		{"Array", []int32{1, 2}, []any{int64(1), int64(2)}},
		{"ByteArray", ua.ByteArray{1, 2}, []any{uint64(1), uint64(2)}},
		{"Matrix", [][]float64{{1, 2}, {3, 4}}, []any{[]any{1.0, 2.0}, []any{3.0, 4.0}}},
		{"Variant array", []*ua.Variant{ua.MustVariant("a"), ua.MustVariant(true)}, []any{"a", true}},
		{"Decoded extension object", ua.NewExtensionObject(&ua.Range{Low: 1, High: 2}), `{"Low":1,"High":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromGo(tc.in)
			if err != nil {
				t.Fatalf("fromGo: %v", err)
			}
			if !value.Equal(got, tc.want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", tc.want) {
				t.Errorf("got %#v (%T), want %#v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

func TestFromVariant_Undecodable(t *testing.T) {
	eo := &ua.ExtensionObject{TypeID: ua.NewFourByteExpandedNodeID(2, 5001)}
	_, err := fromGo(eo)
	if !errors.Is(err, value.ErrTypeMismatch) || !contains(err.Error(), "ns=2;i=5001") {
		t.Errorf("undecodable extension object: %v, want a type mismatch naming the type id", err)
	}
	if _, err := fromGo(&ua.DiagnosticInfo{}); !errors.Is(err, value.ErrTypeMismatch) {
		t.Errorf("DiagnosticInfo: %v, want a type mismatch", err)
	}
}

func TestVQTOf_Quality(t *testing.T) {
	src := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	dv := &ua.DataValue{EncodingMask: ua.DataValueValue | ua.DataValueStatusCode | ua.DataValueSourceTimestamp,
		Value: ua.MustVariant(1.5), Status: ua.StatusUncertainLastUsableValue, SourceTimestamp: src}
	v := vqtOf(dv, value.Auto)
	if v.Quality != value.UncertainLastUsableValue || v.Value != 1.5 || !v.Time.Equal(src) || v.StatusCode != 0x40900000 {
		t.Errorf("uncertain value: %+v", v)
	}
	bad := vqtOf(&ua.DataValue{Status: ua.StatusBadNodeIDUnknown}, value.Auto)
	if bad.Quality != value.BadNodeIDUnknown || bad.Value != nil || bad.StatusCode != 0x80340000 || bad.Reason != "BadNodeIdUnknown (0x80340000)" {
		t.Errorf("bad value: %+v", bad)
	}
	eo := &ua.DataValue{Status: ua.StatusBadDataTypeIDUnknown, Value: ua.MustVariant(&ua.ExtensionObject{TypeID: ua.NewFourByteExpandedNodeID(3, 77)})}
	if v := vqtOf(eo, value.Auto); v.Quality != value.BadTypeMismatch || !contains(v.Reason, "ns=3;i=77") {
		t.Errorf("undecodable extension object: %+v", v)
	}
}

func TestToVariant_Coercion(t *testing.T) {
	scalar := func(b ua.TypeID) typeInfo { return typeInfo{builtin: b, writable: true} }
	for _, tc := range []struct {
		name string
		ti   typeInfo
		in   value.Value
		want any
	}{
		{"bool", scalar(ua.TypeIDBoolean), true, true},
		{"bool from 1", scalar(ua.TypeIDBoolean), int64(1), true},
		{"sbyte", scalar(ua.TypeIDSByte), int64(-128), int8(-128)},
		{"byte from float", scalar(ua.TypeIDByte), 255.0, uint8(255)},
		{"int16", scalar(ua.TypeIDInt16), int64(-32768), int16(-32768)},
		{"uint16", scalar(ua.TypeIDUint16), uint64(65535), uint16(65535)},
		{"int32", scalar(ua.TypeIDInt32), int64(math.MaxInt32), int32(math.MaxInt32)},
		{"uint32", scalar(ua.TypeIDUint32), int64(7), uint32(7)},
		{"int64", scalar(ua.TypeIDInt64), int64(math.MinInt64), int64(math.MinInt64)},
		{"uint64", scalar(ua.TypeIDUint64), uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"float", scalar(ua.TypeIDFloat), 0.1, float32(0.1)},
		{"float from int", scalar(ua.TypeIDFloat), int64(16777216), float32(16777216)},
		{"double from int", scalar(ua.TypeIDDouble), int64(1 << 53), float64(1 << 53)},
		{"string", scalar(ua.TypeIDString), "s", "s"},
		{"datetime", scalar(ua.TypeIDDateTime), "2024-01-02T03:04:05+01:00", time.Date(2024, 1, 2, 2, 4, 5, 0, time.UTC)},
		{"statuscode", scalar(ua.TypeIDStatusCode), int64(0x80340000), ua.StatusBadNodeIDUnknown},
		{"xml", scalar(ua.TypeIDXMLElement), "<a/>", ua.XMLElement("<a/>")},
		{"json number", scalar(ua.TypeIDInt32), jsonNumber("42"), int32(42)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := toVariant(tc.ti, tc.in)
			if err != nil {
				t.Fatalf("toVariant: %v", err)
			}
			got := v.Value()
			if tm, ok := got.(time.Time); ok {
				if !tm.Equal(tc.want.(time.Time)) {
					t.Errorf("got %v, want %v", tm, tc.want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %#v (%T), want %#v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

func TestToVariant_Arrays(t *testing.T) {
	v, err := toVariant(typeInfo{builtin: ua.TypeIDByte, array: true}, []any{int64(1), 2.0})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := v.Value().(ua.ByteArray); !ok || len(b) != 2 || b[1] != 2 || v.Type() != ua.TypeIDByte {
		t.Errorf("Byte array encoded as %T %v (type %d), want an array of Byte", v.Value(), v.Value(), v.Type())
	}
	v, err = toVariant(typeInfo{builtin: ua.TypeIDString, array: true}, []any{})
	if err != nil || v.Type() != ua.TypeIDString || !v.Has(ua.VariantArrayValues) {
		t.Errorf("empty String array: %v, %v", v, err)
	}
}

// Lossy coercions are refused: out of range wraps value.ErrOutOfRange,
// everything else value.ErrTypeMismatch.
func TestToVariant_RefusesLossy(t *testing.T) {
	scalar := func(b ua.TypeID) typeInfo { return typeInfo{builtin: b, writable: true} }
	for _, tc := range []struct {
		name string
		ti   typeInfo
		in   value.Value
		want error
	}{
		{"fraction to int", scalar(ua.TypeIDInt32), 1.5, value.ErrTypeMismatch},
		{"sbyte overflow", scalar(ua.TypeIDSByte), int64(128), value.ErrOutOfRange},
		{"byte negative", scalar(ua.TypeIDByte), int64(-1), value.ErrOutOfRange},
		{"uint32 overflow", scalar(ua.TypeIDUint32), uint64(1 << 32), value.ErrOutOfRange},
		{"int64 from huge uint", scalar(ua.TypeIDInt64), uint64(math.MaxUint64), value.ErrOutOfRange},
		{"float from inexact int", scalar(ua.TypeIDFloat), int64(16777217), value.ErrTypeMismatch},
		{"double from inexact int", scalar(ua.TypeIDDouble), int64(1<<53 + 1), value.ErrTypeMismatch},
		{"double from inexact uint", scalar(ua.TypeIDDouble), uint64(math.MaxUint64), value.ErrTypeMismatch},
		{"float overflow", scalar(ua.TypeIDFloat), 1e39, value.ErrOutOfRange},
		{"string to number", scalar(ua.TypeIDDouble), "1.5", value.ErrTypeMismatch},
		{"number to string", scalar(ua.TypeIDString), 1.5, value.ErrTypeMismatch},
		{"bool to number", scalar(ua.TypeIDInt32), true, value.ErrTypeMismatch},
		{"2 to bool", scalar(ua.TypeIDBoolean), int64(2), value.ErrTypeMismatch},
		{"bad datetime", scalar(ua.TypeIDDateTime), "2024-13-01", value.ErrTypeMismatch},
		{"bad guid", scalar(ua.TypeIDGUID), "72962B91FA754AE68D28B404DC7DAF63", value.ErrTypeMismatch},
		{"bad base64", scalar(ua.TypeIDByteString), "%%%", value.ErrTypeMismatch},
		{"array to scalar", scalar(ua.TypeIDInt32), []any{int64(1)}, value.ErrTypeMismatch},
		{"scalar to array", typeInfo{builtin: ua.TypeIDInt32, array: true}, int64(1), value.ErrTypeMismatch},
		{"unknown built-in type", typeInfo{reason: "DataType ns=2;i=9 unknown"}, int64(1), value.ErrTypeMismatch},
		{"extension object", scalar(ua.TypeIDExtensionObject), "{}", value.ErrTypeMismatch},
		{"ByteString array of unequal lengths", typeInfo{builtin: ua.TypeIDByteString, array: true}, []any{"AA==", "AAA="}, value.ErrTypeMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := toVariant(tc.ti, tc.in)
			if !errors.Is(err, tc.want) {
				t.Errorf("toVariant(%#v) = %v, want %v", tc.in, err, tc.want)
			}
		})
	}
}

func TestBuiltinOf_Subtypes(t *testing.T) {
	for _, tc := range []struct {
		id   *ua.NodeID
		want ua.TypeID
	}{
		{ua.NewNumericNodeID(0, 11), ua.TypeIDDouble},
		{ua.NewNumericNodeID(0, 294), ua.TypeIDDateTime}, // UtcTime
		{ua.NewNumericNodeID(0, 290), ua.TypeIDDouble},   // Duration
		{ua.NewNumericNodeID(0, 852), 0},                 // ServerState: from the value
		{ua.NewNumericNodeID(0, 24), 0},                  // BaseDataType: from the value
		{ua.NewNumericNodeID(2, 11), 0},                  // a vendor type
	} {
		if got := builtinOf(tc.id); got != tc.want {
			t.Errorf("builtinOf(%s) = %d, want %d", tc.id, got, tc.want)
		}
	}
}

func jsonNumber(s string) json.Number { return json.Number(s) }

// TestVQTOf_KeepsBothTimestamps: the source timestamp is the VQT's time
// (used for history), the server timestamp is kept beside it (issue 6,
// Status codes).
func TestVQTOf_KeepsBothTimestamps(t *testing.T) {
	src := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := src.Add(7 * time.Millisecond)
	dv := &ua.DataValue{EncodingMask: ua.DataValueValue | ua.DataValueSourceTimestamp | ua.DataValueServerTimestamp,
		Value: ua.MustVariant(2.5), SourceTimestamp: src, ServerTimestamp: srv}
	v := vqtOf(dv, value.Auto)
	if !v.Time.Equal(src) || !v.ServerTime.Equal(srv) || v.Quality != value.Good {
		t.Fatalf("vqt %+v, want source %v and server %v", v, src, srv)
	}
}
