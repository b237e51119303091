package value

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestQuality_NamesRoundTrip(t *testing.T) {
	for q := Quality(0); q < numQualities; q++ {
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		var back Quality
		if err := json.Unmarshal(b, &back); err != nil || back != q {
			t.Fatalf("%s: %s -> %v %v", q, b, back, err)
		}
	}
	if BadNodeIDUnknown.String() != "Bad_NodeIdUnknown" || UncertainLastUsableValue.String() != "Uncertain_LastUsableValue" {
		t.Fatal("contract names changed")
	}
	if !BadTimeout.IsBad() || !UncertainLastUsableValue.IsUncertain() || !Good.IsGood() || Quality(0).IsGood() {
		t.Fatal("classification")
	}
}

func TestCoerce(t *testing.T) {
	cases := []struct {
		typ  Type
		in   Value
		want Value
		err  error
	}{
		{Int16, -20, int64(-20), nil},
		{Int16, 32767.0, int64(32767), nil},
		{Int16, 32768, nil, ErrOutOfRange},
		{Int16, -32769.0, nil, ErrOutOfRange},
		{Int16, 1.5, nil, ErrTypeMismatch},
		{Int16, "7", nil, ErrTypeMismatch},
		{Uint16, 65535, uint64(65535), nil},
		{Uint16, -1, nil, ErrOutOfRange},
		{Uint16, 65536.0, nil, ErrOutOfRange},
		{Int64, json.Number("9223372036854775807"), int64(math.MaxInt64), nil},
		{Uint64, json.Number("18446744073709551615"), uint64(math.MaxUint64), nil},
		{Int64, json.Number("9223372036854775808"), nil, ErrOutOfRange},
		{Int64, json.Number("-9223372036854775809"), nil, ErrOutOfRange},
		{Int64, json.Number("-9223372036854775808"), int64(math.MinInt64), nil},
		{Uint64, json.Number("18446744073709551616"), nil, ErrOutOfRange},
		{Float64, json.Number("-9223372036854775809"), -9223372036854775809.0, nil},
		{Float32, 1e39, nil, ErrOutOfRange},
		{Float32, 12.5, 12.5, nil},
		{Float32, 12.3, 12.3, nil}, // the nearest float32, as its shortest decimal
		{Float64, int64(3), 3.0, nil},
		{Bool, true, true, nil},
		{Bool, 1, true, nil},
		{Bool, 2, nil, ErrTypeMismatch},
		{String, "abc", "abc", nil},
		{String, 1, nil, ErrTypeMismatch},
	}
	for _, c := range cases {
		got, err := Coerce(c.typ, c.in)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Coerce(%s, %v) err = %v, want %v", c.typ, c.in, err, c.err)
			}
			continue
		}
		if err != nil || !Equal(got, c.want) {
			t.Errorf("Coerce(%s, %v) = %v (%T), %v; want %v", c.typ, c.in, got, got, err, c.want)
		}
	}
}

func TestParseType(t *testing.T) {
	for _, n := range []string{"bool", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64", "string", "auto"} {
		typ, err := ParseType(n)
		if err != nil || typ.String() != n {
			t.Errorf("%s: %v %v", n, typ, err)
		}
	}
	if _, err := ParseType("float"); err == nil {
		t.Error(`"float" is ambiguous and must be refused`)
	}
}

func TestCoerce_MessagesShowTheValueAsSent(t *testing.T) {
	cases := map[string]struct {
		typ  Type
		in   Value
		want string
	}{
		"quoted string": {Float64, "900", `"900" is not a number`},
		"empty string":  {Float64, "", `"" is not a number`},
		"array":         {Int16, []any{int64(1), int64(2)}, `[1,2] is not a number`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Coerce(c.typ, c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestCoerceQuality_OneMapping(t *testing.T) {
	_, oor := Coerce(Int16, 40000)
	_, mis := Coerce(Int16, "x")
	cases := []struct {
		err  error
		want Quality
	}{{nil, Good}, {oor, BadOutOfRange}, {mis, BadTypeMismatch},
		{errors.New("other"), BadTypeMismatch}}
	for _, c := range cases {
		if got := CoerceQuality(c.err); got != c.want {
			t.Errorf("CoerceQuality(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestNonFinite(t *testing.T) {
	cases := map[string]Value{
		"":                 1.5,
		"NaN":              math.NaN(),
		"+Inf":             math.Inf(1),
		"-Inf":             float32(math.Inf(-1)),
		"element 2 is NaN": []any{1.0, 2.0, math.NaN()},
		" ":                "NaN", // a string is not a float
	}
	for want, v := range cases {
		if want == " " {
			want = ""
		}
		if got := NonFinite(v); got != want {
			t.Errorf("NonFinite(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestConforms_WhatCoerceReturns(t *testing.T) {
	for _, c := range []struct {
		t  Type
		in Value
	}{{Int16, -20}, {Uint16, 65535}, {Float32, 12.3}, {Float64, 1}, {Bool, 1}, {String, "x"}, {Int64, json.Number("-9223372036854775808")}} {
		got, err := Coerce(c.t, c.in)
		if err != nil || !Conforms(c.t, got) {
			t.Errorf("Conforms(%s, Coerce(%v) = %v) false", c.t, c.in, got)
		}
	}
	for _, c := range []struct {
		t  Type
		in Value
	}{{Int16, int64(40000)}, {Int16, 5}, {Uint16, int64(1)}, {Float32, 12.30000001}, {Bool, int64(1)}, {String, 1.0}} {
		if Conforms(c.t, c.in) {
			t.Errorf("Conforms(%s, %v (%T)) true", c.t, c.in, c.in)
		}
	}
}
