package store_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/storetest"
	"qubiq.dev/edge/value"
)

func TestDB_LastValues_RoundTrip(t *testing.T) {
	ts := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))
	cases := []struct {
		name string
		vqt  value.VQT
	}{
		{"int64 max", value.VQT{Value: int64(math.MaxInt64), Quality: value.Good, Time: ts}},
		{"int64 min", value.VQT{Value: int64(math.MinInt64), Quality: value.Good, Time: ts}},
		{"uint64 max", value.VQT{Value: uint64(math.MaxUint64), Quality: value.Good, Time: ts}},
		{"small uint64 stays uint64", value.VQT{Value: uint64(7), Quality: value.Good, Time: ts}},
		{"integral float stays float", value.VQT{Value: float64(3), Quality: value.Good, Time: ts}},
		{"big integral float", value.VQT{Value: 1e21, Quality: value.Good, Time: ts}},
		{"float 2^53+ stays float", value.VQT{Value: float64(1 << 60), Quality: value.Good, Time: ts}},
		{"negative zero float", value.VQT{Value: math.Copysign(0, -1), Quality: value.Good, Time: ts}},
		{"fraction", value.VQT{Value: 0.1, Quality: value.Good, Time: ts}},
		{"NaN", value.VQT{Value: math.NaN(), Quality: value.Good, Time: ts}},
		{"+Inf", value.VQT{Value: math.Inf(1), Quality: value.Good, Time: ts}},
		{"string", value.VQT{Value: "NaN", Quality: value.Good, Time: ts}},
		{"bool", value.VQT{Value: true, Quality: value.Good, Time: ts}},
		{"no value, bad quality, reason, status", value.VQT{Quality: value.BadNotConnected,
			Time: ts, Reason: "connection refused", StatusCode: 0x808A0000}},
		{"uint64 array", value.VQT{Value: []any{uint64(1), uint64(math.MaxUint64)}, Quality: value.Good, Time: ts}},
		{"float array with NaN", value.VQT{Value: []any{1.0, math.NaN(), math.Inf(-1)}, Quality: value.Good, Time: ts}},
		{"mixed array", value.VQT{Value: []any{int64(-1), "x", 2.0, nil, false}, Quality: value.Uncertain, Time: ts}},
		{"zero time", value.VQT{Value: int64(1), Quality: value.BadWaitingForInitialData}},
		{"go int normalised", value.VQT{Value: 42, Quality: value.Good, Time: ts}},
	}
	db := storetest.MustOpen(t)
	in := map[string]value.VQT{}
	for _, tc := range cases {
		in[tc.name] = tc.vqt
	}
	if err := db.SaveLastValues(in); err != nil {
		t.Fatal(err)
	}
	out, err := db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(cases) {
		t.Errorf("loaded %d values, saved %d", len(out), len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := out[tc.name]
			if !ok {
				t.Fatal("missing")
			}
			want := value.Normalize(tc.vqt.Value)
			if !value.Equal(got.Value, want) || reflect.TypeOf(got.Value) != reflect.TypeOf(want) {
				t.Errorf("value = %#v (%T), want %#v (%T)", got.Value, got.Value, want, want)
			}
			if f, ok := want.(float64); ok && math.Signbit(f) != math.Signbit(got.Value.(float64)) {
				t.Errorf("sign of %v lost: %v", f, got.Value)
			}
			if got.Quality != tc.vqt.Quality || got.Reason != tc.vqt.Reason || got.StatusCode != tc.vqt.StatusCode {
				t.Errorf("got %+v, want %+v", got, tc.vqt)
			}
			if !got.Time.Equal(tc.vqt.Time) || got.Time.Location() != time.UTC {
				t.Errorf("time = %v, want %v in UTC", got.Time, tc.vqt.Time)
			}
		})
	}
}

func TestDB_SaveLastValues_Upsert(t *testing.T) {
	db := storetest.MustOpen(t)
	ts := time.Unix(100, 0).UTC()
	if err := db.SaveLastValues(map[string]value.VQT{
		"A/x": {Value: int64(1), Quality: value.Good, Time: ts},
		"A/y": {Value: int64(2), Quality: value.Good, Time: ts},
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveLastValues(map[string]value.VQT{
		"A/y": {Value: int64(3), Quality: value.BadTimeout, Time: ts.Add(time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	if got["A/x"].Value != int64(1) || got["A/y"].Value != int64(3) || got["A/y"].Quality != value.BadTimeout {
		t.Errorf("after upsert: %+v", got)
	}
	if err := db.DeleteLastValues("A/x", "absent"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LoadLastValues(); len(got) != 1 {
		t.Errorf("after delete: %+v", got)
	}
}

// A value that cannot be stored never stops the others: they are stored,
// and the error names the tag that was not (a 40 KB path made bbolt refuse
// the whole batch once, and no tag's value persisted).
func TestDB_SaveLastValues_BadValueNeverStopsTheOthers(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		v    value.Value
	}{
		{"struct", "Bad/one", struct{ X int }{1}},
		{"map", "Bad/one", map[string]any{"a": 1}},
		{"NaN among ints", "Bad/one", []any{int64(1), math.NaN()}},
		{"NaN beside the string NaN", "Bad/one", []any{"NaN", math.NaN()}},
		{"40 KB path", strings.Repeat("Bad/one/", 5000), int64(2)},
		{"empty path", "", int64(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := storetest.MustOpen(t)
			err := db.SaveLastValues(map[string]value.VQT{
				"Good/one": {Value: int64(1), Quality: value.Good},
				tc.path:    {Value: tc.v, Quality: value.Good},
				"Good/two": {Value: "x", Quality: value.Good},
			})
			var lve *store.LastValuesError
			if !errors.As(err, &lve) || len(lve.Failed) != 1 || lve.Failed[tc.path] == nil || !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("err = %v, want a LastValuesError naming only the bad value", err)
			}
			if len(tc.path) < 100 && !strings.Contains(err.Error(), `"`+tc.path+`"`) {
				t.Errorf("err %q does not name %q", err, tc.path)
			}
			got, err := db.LoadLastValues()
			if err != nil || len(got) != 2 || got["Good/one"].Value != int64(1) || got["Good/two"].Value != "x" {
				t.Errorf("stored %v, %v; want both good values", got, err)
			}
		})
	}
}

// The engine's flush writes records with appendVQT; they must be the
// bytes encodeVQT (encoding/json) writes, so that either reads the other.
func TestAppendVQT_SameBytesAsEncodeVQT(t *testing.T) {
	ts := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))
	cases := []value.VQT{
		{Value: 21.5, Quality: value.Good, Time: ts},
		{Value: float64(3), Quality: value.Good, Time: ts},
		{Value: math.NaN(), Quality: value.Uncertain, Time: ts, Reason: "the device sent NaN; kept"},
		{Value: []any{1.0, math.Inf(1)}, Quality: value.Good, Time: ts},
		{Value: uint64(7), Quality: value.Good, Time: ts},
		{Value: []any{uint64(1), uint64(2)}, Quality: value.Good, Time: ts},
		{Value: int64(-4), Quality: value.Good, Time: ts.Truncate(time.Second)},
		{Value: "a <b> & \"c\"\n é", Quality: value.Good, Time: ts},
		{Value: []any{"x", int64(1), nil, true}, Quality: value.Uncertain, Time: ts},
		{Value: true, Quality: value.UncertainLastUsableValue, Time: ts, Reason: "last value before restart"},
		{Quality: value.BadNotConnected, Time: ts, Reason: "no <connection> to \"plc\"", StatusCode: 0x808A0000},
		{Value: int64(1), Quality: value.BadWaitingForInitialData},
		{Value: 1.5, Quality: value.Quality(250), Time: ts},
	}
	for i, vqt := range cases {
		want, werr := store.EncodeVQTForTest(vqt)
		got, gerr := store.AppendVQTForTest([]byte("prefix"), vqt)
		if (werr != nil) != (gerr != nil) {
			t.Errorf("case %d: error %v, encodeVQT's %v", i, gerr, werr)
			continue
		}
		if werr == nil && string(got) != "prefix"+string(want) {
			t.Errorf("case %d:\n got %s\nwant prefix%s", i, got, want)
		}
	}
}

func TestDB_PutLastValues_SortedAndUnsorted(t *testing.T) {
	db := storetest.MustOpen(t)
	ts := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.PutLastValues([]string{"A/b", "A/a"}, []value.VQT{
		{Value: 2.0, Quality: value.Good, Time: ts}, {Value: 1.0, Quality: value.Good, Time: ts}}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutLastValues([]string{"", "A/c"}, []value.VQT{
		{Value: 9.0, Quality: value.Good, Time: ts}, {Value: 3.0, Quality: value.Good, Time: ts}}); err == nil {
		t.Error("an empty path was accepted")
	}
	out, err := db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]float64{"A/a": 1, "A/b": 2, "A/c": 3} {
		if got := out[p].Value; got != want {
			t.Errorf("%s = %v, want %v", p, got, want)
		}
	}
	if len(out) != 3 {
		t.Errorf("stored %d values, want 3", len(out))
	}
}
