package opcua

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

// Every built-in scalar type, arrays and standard subtypes read from
// node-opcua map onto the normalised values of package value.
func TestDriver_Read_EachType(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	for _, tc := range []struct {
		node string
		want value.Value
	}{
		{"Bool", true},
		{"SByte", int64(-5)},
		{"Byte", uint64(200)},
		{"Int16", int64(-1234)},
		{"UInt16", uint64(60000)},
		{"Int32", int64(-123456)},
		{"UInt32", uint64(4000000000)},
		{"Int64", int64(-9007199254740993)},
		{"UInt64", uint64(math.MaxUint64)},
		{"Float", 3.5},
		{"Double", 2.718281828459045},
		{"String", "h\u00e9llo"},
		{"DateTime", "2024-05-06T07:08:09.123Z"},
		{"Guid", "72962B91-FA75-4AE6-8D28-B404DC7DAF63"},
		{"ByteString", "AAEC/w=="},
		{"LocalizedText", "Pumpe"},
		{"XmlElement", "<a>1</a>"},
		{"NodeId", "ns=1;i=42"},
		{"QualifiedName", "1:Q"},
		{"StatusCode", uint64(0x803C0000)},
		{"UtcTime", "2023-01-02T03:04:05Z"},
		{"Duration", 1500.0},
		{"Enum", int64(0)},
		{"Int32Array", []any{int64(1), int64(2), int64(3)}},
		{"DoubleArray", []any{1.5, -2.25}},
		{"StringArray", []any{"a", "b"}},
		{"BoolArray", []any{true, false}},
		{"ByteArray", []any{uint64(1), uint64(2), uint64(3)}},
	} {
		t.Run(tc.node, func(t *testing.T) {
			v := readOne(t, d, vpoint(tc.node, value.Auto))
			if !isGood(v) {
				t.Fatalf("quality %s (%s), want Good", v.Quality, v.Reason)
			}
			if !value.Equal(v.Value, tc.want) || fmt.Sprintf("%T", v.Value) != fmt.Sprintf("%T", tc.want) {
				t.Errorf("value %#v (%T), want %#v (%T)", v.Value, v.Value, tc.want, tc.want)
			}
			if v.Time.IsZero() || v.Time.Location().String() != "UTC" {
				t.Errorf("time %v, want a UTC source time", v.Time)
			}
		})
	}
}

// A tag's own type applies to the value read; one that does not fit is
// Bad_TypeMismatch, not a wrong value.
func TestDriver_Read_TagType(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	if v := readOne(t, d, vpoint("Int32", value.Float64)); !isGood(v) || v.Value != -123456.0 {
		t.Errorf("Int32 as float64: %#v %s", v.Value, v.Quality)
	}
	if v := readOne(t, d, vpoint("Double", value.Int32)); v.Quality != value.BadTypeMismatch {
		t.Errorf("Double 2.718 as int32: %s, want Bad_TypeMismatch", v.Quality)
	}
	if v := readOne(t, d, vpoint("UInt32", value.Int16)); v.Quality != value.BadOutOfRange {
		t.Errorf("UInt32 4e9 as int16: %s, want Bad_OutOfRange", v.Quality)
	}
	unknown := vpoint("NoSuchNode", value.Auto)
	if v := readOne(t, d, unknown); v.Quality != value.BadNodeIDUnknown || v.StatusCode != 0x80340000 {
		t.Errorf("unknown node: %s 0x%08X, want Bad_NodeIdUnknown 0x80340000", v.Quality, v.StatusCode)
	}
	noNS := device.Point{Tag: "x", Address: "nsu=urn:nobody;s=X", Type: value.Auto}
	if v := readOne(t, d, noNS); v.Quality != value.BadNodeIDUnknown || !strings.Contains(v.Reason, "namespace") {
		t.Errorf("unknown namespace: %s %q, want Bad_NodeIdUnknown naming the namespace", v.Quality, v.Reason)
	}
}

// Writes coerce to the node's DataType; the server holds what was meant.
func TestDriver_Write_EachType(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	for _, tc := range []struct {
		node   string
		write  value.Value
		want   value.Value // read back through the driver
		server any         // as the server's "get" reports it (JSON)
	}{
		{"Bool", false, false, false},
		{"SByte", int64(-100), int64(-100), -100.0},
		{"Byte", 7.0, uint64(7), 7.0},
		{"Int16", int64(-32768), int64(-32768), -32768.0},
		{"UInt16", uint64(65535), uint64(65535), 65535.0},
		{"Int32", int64(2147483647), int64(2147483647), 2147483647.0},
		{"UInt32", int64(1), uint64(1), 1.0},
		{"Int64", int64(math.MinInt64), int64(math.MinInt64), "-9223372036854775808"},
		{"UInt64", uint64(12345678901234567890), uint64(12345678901234567890), "12345678901234567890"},
		{"Float", 0.1, 0.1, nil},
		{"Double", -1e300, -1e300, -1e300},
		{"String", "gr\u00fc\u00df", "gr\u00fc\u00df", "gr\u00fc\u00df"},
		{"DateTime", "2025-12-31T23:59:58.5Z", "2025-12-31T23:59:58.5Z", "2025-12-31T23:59:58.500Z"},
		{"Guid", "00112233-4455-6677-8899-AABBCCDDEEFF", "00112233-4455-6677-8899-AABBCCDDEEFF", "00112233-4455-6677-8899-AABBCCDDEEFF"},
		{"ByteString", "3q2+7w==", "3q2+7w==", "3q2+7w=="},
		{"LocalizedText", "Pump", "Pump", "Pump"},
		{"XmlElement", "<b/>", "<b/>", "<b/>"},
		{"NodeId", "ns=1;s=Motor", "ns=1;s=Motor", "ns=1;s=Motor"},
		{"QualifiedName", "2:Speed", "2:Speed", "2:Speed"},
		{"StatusCode", uint64(0x80340000), uint64(0x80340000), float64(0x80340000)},
		{"UtcTime", "2020-02-29T12:00:00Z", "2020-02-29T12:00:00Z", "2020-02-29T12:00:00.000Z"},
		{"Duration", int64(250), 250.0, 250.0},
		{"Enum", int64(2), int64(2), 2.0},
		{"Int32Array", []any{int64(-1), 0.0, uint64(9)}, []any{int64(-1), int64(0), int64(9)}, []any{-1.0, 0.0, 9.0}},
		{"DoubleArray", []any{0.5}, []any{0.5}, []any{0.5}},
		{"StringArray", []any{}, []any{}, []any{}},
		{"BoolArray", []any{true, true, false}, []any{true, true, false}, []any{true, true, false}},
		{"ByteArray", []any{int64(255), int64(0)}, []any{uint64(255), uint64(0)}, []any{255.0, 0.0}},
	} {
		t.Run(tc.node, func(t *testing.T) {
			p := vpoint(tc.node, value.Auto)
			if err := devicetest.Write(t.Context(), d, p, tc.write); err != nil {
				t.Fatalf("Write(%#v): %v", tc.write, err)
			}
			v := readOne(t, d, p)
			if !isGood(v) || !value.Equal(v.Value, tc.want) {
				t.Errorf("read back %#v %s, want %#v", v.Value, v.Quality, tc.want)
			}
			if tc.server != nil {
				got := srv.Cmd("get " + tc.node)["value"]
				if fmt.Sprint(got) != fmt.Sprint(tc.server) {
					t.Errorf("server holds %#v, want %#v", got, tc.server)
				}
			}
		})
	}
}

// Lossy coercions, read-only nodes and unknown nodes are refused with the
// quality that says why, and nothing reaches the server.
func TestDriver_Write_Refusals(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	for _, tc := range []struct {
		name string
		p    device.Point
		v    value.Value
		want value.Quality
	}{
		{"fraction to Int16", vpoint("Int16", value.Auto), 1.5, value.BadTypeMismatch},
		{"string to Int32", vpoint("Int32", value.Auto), "12", value.BadTypeMismatch},
		{"300 to Byte", vpoint("Byte", value.Auto), int64(300), value.BadOutOfRange},
		{"negative to UInt16", vpoint("UInt16", value.Auto), int64(-1), value.BadOutOfRange},
		{"2^53+1 to Double", vpoint("Double", value.Auto), int64(1<<53 + 1), value.BadTypeMismatch},
		{"16777217 to Float", vpoint("Float", value.Auto), int64(16777217), value.BadTypeMismatch},
		{"1e40 to Float", vpoint("Float", value.Auto), 1e40, value.BadOutOfRange},
		{"number to String", vpoint("String", value.Auto), int64(5), value.BadTypeMismatch},
		{"bad DateTime", vpoint("DateTime", value.Auto), "yesterday", value.BadTypeMismatch},
		{"bad Guid", vpoint("Guid", value.Auto), "not-a-guid", value.BadTypeMismatch},
		{"bad base64", vpoint("ByteString", value.Auto), "!!", value.BadTypeMismatch},
		{"array to scalar", vpoint("Int32", value.Auto), []any{int64(1)}, value.BadTypeMismatch},
		{"scalar to array", vpoint("Int32Array", value.Auto), int64(1), value.BadTypeMismatch},
		{"bad array element", vpoint("Int32Array", value.Auto), []any{int64(1), "x"}, value.BadTypeMismatch},
		{"2 to bool", vpoint("Bool", value.Auto), int64(2), value.BadTypeMismatch},
		{"tag type int16 refuses 70000", vpoint("Int32", value.Int16), int64(70000), value.BadOutOfRange},
		{"read-only node", vpoint("ReadOnly", value.Auto), 2.0, value.BadNotWritable},
		{"unknown node", vpoint("NoSuchNode", value.Auto), 2.0, value.BadNodeIDUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := srv.CmdErr("get " + strings.TrimPrefix(tc.p.Tag, "T/"))
			err := devicetest.Write(t.Context(), d, tc.p, tc.v)
			var qe *device.QualityError
			if !errors.As(err, &qe) {
				t.Fatalf("Write = %v, want a *device.QualityError", err)
			}
			if qe.Quality != tc.want {
				t.Errorf("Write = %s (%s), want %s", qe.Quality, qe.Reason, tc.want)
			}
			if before["value"] != nil {
				after := srv.Cmd("get " + strings.TrimPrefix(tc.p.Tag, "T/"))
				if fmt.Sprint(after["value"]) != fmt.Sprint(before["value"]) {
					t.Errorf("the server value changed from %v to %v", before["value"], after["value"])
				}
			}
		})
	}
}
