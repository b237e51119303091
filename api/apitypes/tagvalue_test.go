package apitypes

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

func TestDecodeValue_Exact(t *testing.T) {
	tests := []struct {
		in   string
		want value.Value
	}{
		{`9007199254740993`, int64(9007199254740993)},
		{`18446744073709551615`, uint64(math.MaxUint64)},
		{`-9223372036854775808`, int64(math.MinInt64)},
		{`18446744073709551616`, value.BigInt("18446744073709551616")}, // kept exact: no integer tag takes it
		{`2.5`, 2.5},
		{`1e3`, 1000.0},
		{`true`, true},
		{`"x"`, "x"},
		{`null`, nil},
		{``, nil},
		{`[1, "a", [18446744073709551615]]`, []any{int64(1), "a", []any{uint64(math.MaxUint64)}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := DecodeValue([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !value.Equal(got, tt.want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", tt.want) {
				t.Errorf("DecodeValue(%s) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDecodeValue_Refused(t *testing.T) {
	for _, in := range []string{`{"a":1}`, `[1,{"a":1}]`} {
		if _, err := DecodeValue([]byte(in)); !errors.Is(err, ErrObjectValue) {
			t.Errorf("DecodeValue(%s) err = %v, want ErrObjectValue", in, err)
		}
	}
	for _, in := range []string{`1 2`, `[1`} {
		if _, err := DecodeValue([]byte(in)); err == nil {
			t.Errorf("DecodeValue(%s) accepted", in)
		}
	}
}

// TestDecodeValue_NumberBeyondFloat64: 1e400 is a number, but beyond
// float64's range (no tag type holds it): refused as out of range naming
// it, not kept as the string "1e400" a float tag calls "not a number";
// a string "1e400" and a number that underflows to 0 are values.
func TestDecodeValue_NumberBeyondFloat64(t *testing.T) {
	for _, in := range []string{`1e400`, `-1e400`, `[1, [2e308]]`} {
		_, err := DecodeValue([]byte(in))
		var he *HugeNumberError
		if !errors.As(err, &he) || !errors.Is(err, value.ErrOutOfRange) ||
			!strings.Contains(err.Error(), "is a number beyond float64's range (±1.7976931348623157e+308)") || strings.Contains(err.Error(), "not a number") {
			t.Errorf("DecodeValue(%s) err = %v", in, err)
		}
	}
	for in, want := range map[string]value.Value{`"1e400"`: "1e400", `1e-400`: 0.0} {
		if got, err := DecodeValue([]byte(in)); err != nil || !value.Equal(got, want) {
			t.Errorf("DecodeValue(%s) = %#v, %v; want %#v", in, got, err, want)
		}
	}
}

func TestTagValue_MarshalJSON_Wire(t *testing.T) {
	ts := time.Date(2025, 3, 1, 13, 0, 0, 500, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		in   TagValue
		want string
	}{
		{"uint64", TagValue{Path: "A", Value: uint64(math.MaxUint64), Quality: "Good", Timestamp: ts},
			`{"path":"A","value":18446744073709551615,"quality":"Good","timestamp":"2025-03-01T12:00:00.000000500Z"}`},
		{"small int kinds normalised", TagValue{Path: "A", Value: int16(-3), Quality: "Good", Timestamp: ts},
			`{"path":"A","value":-3,"quality":"Good","timestamp":"2025-03-01T12:00:00.000000500Z"}`},
		{"no value, reason, status code", TagValue{Path: "A", Quality: "Bad_CertificateUntrusted", Timestamp: ts, Reason: "certificate not trusted", StatusCode: 0x801A0000},
			`{"path":"A","value":null,"quality":"Bad_CertificateUntrusted","timestamp":"2025-03-01T12:00:00.000000500Z","reason":"certificate not trusted","status_code":2149187584}`},
		{"NaN is null", TagValue{Path: "A", Value: []any{math.NaN(), 1.5, math.Inf(1)}, Quality: "Good", Timestamp: ts},
			`{"path":"A","value":[null,1.5,null],"quality":"Good","timestamp":"2025-03-01T12:00:00.000000500Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
			var back TagValue
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !back.Timestamp.Equal(ts) || back.Path != tt.in.Path || back.Quality != tt.in.Quality || back.StatusCode != tt.in.StatusCode {
				t.Errorf("round trip = %+v", back)
			}
		})
	}
	if _, err := json.Marshal(TagValue{Path: "A", Value: struct{}{}}); err == nil {
		t.Errorf("a struct value was encoded")
	}
}

func TestFromVQT_Fields(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	got := FromVQT("P", value.VQT{Value: int64(1), Quality: value.UncertainLastUsableValue, Time: ts, Reason: "r", StatusCode: 7})
	want := TagValue{Path: "P", Value: int64(1), Quality: "Uncertain_LastUsableValue", Timestamp: ts, Reason: "r", StatusCode: 7}
	if !value.Equal(got.Value, want.Value) || got.Quality != want.Quality || !got.Timestamp.Equal(ts) || got.Reason != "r" || got.StatusCode != 7 {
		t.Errorf("FromVQT = %+v, want %+v", got, want)
	}
}

func TestTagValue_ServerTimestampRoundTrip(t *testing.T) {
	src := time.Date(2026, 11, 30, 10, 0, 0, 123000000, time.UTC)
	srv := src.Add(5 * time.Millisecond)
	b, err := json.Marshal(FromVQT("A", value.VQT{Value: 1.5, Quality: value.Good, Time: src, ServerTime: srv}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"server_timestamp":"2026-11-30T10:00:00.128000000Z"`) {
		t.Fatalf("wire %s lacks the server timestamp", b)
	}
	var back TagValue
	if err := json.Unmarshal(b, &back); err != nil || !back.ServerTimestamp.Equal(srv) || !back.Timestamp.Equal(src) {
		t.Fatalf("round trip %+v %v", back, err)
	}
	plain, _ := json.Marshal(FromVQT("B", value.VQT{Value: 1, Quality: value.Good, Time: src}))
	if strings.Contains(string(plain), "server_timestamp") {
		t.Fatalf("a value without a server timestamp carries one: %s", plain)
	}
}
