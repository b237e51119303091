package opcua

import (
	"encoding/binary"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// ticks returns the DateTime ticks of t (Part 6 §5.2.2.5).
func ticks(t time.Time) int64 { return (t.Unix()+11644473600)*1e7 + int64(t.Nanosecond()/100) }

// rawDataValue encodes a DataValue as a server sends it (Part 6 §5.2.2.17):
// a DateTime value (ticks, or an array of them) and source and server
// timestamps (0: absent), then decodes it with gopcua v0.8.0's own decoder.
func rawDataValue(t *testing.T, val []int64, array bool, src, srv int64) *ua.DataValue {
	t.Helper()
	mask := byte(0x01)
	if src != 0 {
		mask |= 0x04
	}
	if srv != 0 {
		mask |= 0x08
	}
	b := []byte{mask}
	if array {
		b = append(b, 13|0x80)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(val)))
	} else {
		b = append(b, 13)
	}
	for _, v := range val {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	if src != 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(src))
	}
	if srv != 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(srv))
	}
	dv := new(ua.DataValue)
	if _, err := dv.Decode(b); err != nil {
		t.Fatalf("gopcua decode: %v", err)
	}
	return dv
}

// DateTime values come from the raw ticks: dates gopcua v0.8.0 would wrap
// (outside 1677–2262) are exact, 0 ticks and the minimum are "no date",
// the maximum is clamped and Uncertain; never a wrapped date with Good.
func TestDateTime_ValuesFromRawTicks(t *testing.T) {
	d := func(y int, mo time.Month, day, h, mi, s, ns int) int64 {
		return ticks(time.Date(y, mo, day, h, mi, s, ns, time.UTC))
	}
	tests := []struct {
		name  string
		ticks int64
		want  string
		q     value.Quality
	}{
		{"0 ticks: no date", 0, "", value.Good},
		{"Int64.MinValue: no date", math.MinInt64, "", value.Good},
		{"one tick after the minimum", 1, "1601-01-01T00:00:00.0000001Z", value.Good},
		{"1650", d(1650, 6, 15, 12, 0, 0, 0), "1650-06-15T12:00:00Z", value.Good},
		{"2024", d(2024, 5, 6, 7, 8, 9, 123456700), "2024-05-06T07:08:09.1234567Z", value.Good},
		{"2300", d(2300, 1, 1, 0, 0, 0, 0), "2300-01-01T00:00:00Z", value.Good},
		{"just under the maximum", d(9999, 12, 31, 23, 59, 58, 0), "9999-12-31T23:59:58Z", value.Good},
		{"the maximum", d(9999, 12, 31, 23, 59, 59, 0), "9999-12-31T23:59:59Z", value.Uncertain},
		{"Int64.MaxValue", math.MaxInt64, "9999-12-31T23:59:59Z", value.Uncertain},
	}
	now := ticks(time.Now())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dv := rawDataValue(t, []int64{tc.ticks}, false, now, now)
			v := vqtOf(dv, value.Auto)
			if v.Value != tc.want || v.Quality != tc.q {
				t.Fatalf("= %q %s (%s), want %q %s", v.Value, v.Quality, v.Reason, tc.want, tc.q)
			}
			if tc.q == value.Uncertain && !strings.Contains(v.Reason, "OPC UA maximum") {
				t.Errorf("reason %q does not say the date was clamped", v.Reason)
			}
		})
	}
	// The fault this works around: gopcua's own time for Int64.MaxValue
	// is not the maximum.
	if got := rawDataValue(t, []int64{math.MaxInt64}, false, 0, 0).Value.Value().(time.Time); got.Year() == 9999 {
		t.Log("gopcua decodes Int64.MaxValue as", got, "(no longer wrapped: re-check datetime.go)")
	}
	arr := vqtOf(rawDataValue(t, []int64{0, d(1650, 1, 1, 0, 0, 0, 0), math.MaxInt64}, true, now, 0), value.Auto)
	if !value.Equal(arr.Value, []any{"", "1650-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}) || arr.Quality != value.Uncertain {
		t.Fatalf("array: %+v", arr)
	}
}

// Timestamps too: no date is absent, a date the data path cannot store is
// replaced by the arrival time with a reason, a date in the future is
// kept as data with a reason; never wrapped.
func TestDateTime_Timestamps(t *testing.T) {
	now := time.Now().UTC()
	srvT := now.Add(-time.Second)
	val := []int64{ticks(now)}
	tests := []struct {
		name     string
		src, srv int64
		want     time.Time // zero: the arrival time
		why      string
	}{
		{"source", ticks(srvT), ticks(now), srvT.Truncate(100), ""},
		{"no source: server", 0, ticks(srvT), srvT.Truncate(100), ""},
		{"source in 2300", ticks(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)), ticks(srvT), time.Time{}, "source timestamp 2300-01-01T00:00:00Z cannot be stored"},
		{"source Int64.MaxValue", math.MaxInt64, ticks(srvT), time.Time{}, "source timestamp 9999-12-31T23:59:59Z cannot be stored"},
		{"source in 1650", ticks(time.Date(1650, 1, 1, 0, 0, 0, 0, time.UTC)), 0, time.Time{}, "source timestamp 1650-01-01T00:00:00Z cannot be stored"},
		{"source a day ahead", ticks(now.Add(24 * time.Hour)), ticks(srvT), now.Add(24 * time.Hour).Truncate(100), "ahead of the gateway clock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			v := vqtOf(rawDataValue(t, val, false, tc.src, tc.srv), value.Auto)
			switch {
			case tc.want.IsZero():
				if v.Time.Before(before.Add(-time.Second)) || v.Time.After(time.Now().Add(time.Second)) {
					t.Errorf("time %v, want the arrival time", v.Time)
				}
			case !v.Time.Equal(tc.want):
				t.Errorf("time %v, want %v", v.Time, tc.want)
			}
			if tc.why == "" && v.Reason != "" || !strings.Contains(v.Reason, tc.why) {
				t.Errorf("reason %q, want %q", v.Reason, tc.why)
			}
			if v.Quality != value.Good {
				t.Errorf("quality %s: the value itself is fine", v.Quality)
			}
		})
	}
}

func TestTicksOf_RecoversEveryEncodableDate(t *testing.T) {
	for _, tk := range []int64{1, 2, 99, 100, 101, 1e7, epochTicks - 1, epochTicks, epochTicks + 1, 9e17, 1e18, 2e18,
		maxDateTicks - 1, maxDateTicks} {
		dv := rawDataValue(t, []int64{tk}, false, 0, 0)
		got, ok := ticksOf(dv.Value.Value().(time.Time))
		if !ok || got != tk {
			t.Errorf("ticksOf(%d) = %d, %v", tk, got, ok)
		}
	}
}

// A status code alone changes the reason too: GoodClamped says so beside
// quality Good and the raw code.
func TestVQTOf_GoodSubcodeNamed(t *testing.T) {
	v := vqtOf(&ua.DataValue{EncodingMask: ua.DataValueValue | ua.DataValueStatusCode, Value: ua.MustVariant(1.5),
		Status: ua.StatusGoodClamped}, value.Auto)
	if v.Quality != value.Good || v.StatusCode != 0x00300000 || v.Reason != "GoodClamped (0x00300000)" || v.Value != 1.5 {
		t.Fatalf("%+v", v)
	}
}

// Device clocks do not order the data: a notification stamped a day in
// the future does not hold back the next one; only the subscription's
// sequence (with its wrap) decides what is stale.
func TestDeliverMessage_OrdersBySequenceNotClock(t *testing.T) {
	var got []value.VQT
	d := &Driver{log: slog.New(slog.DiscardHandler)}
	g := &group{d: d, points: []device.Point{{Tag: "T", Address: "ns=2;s=T", Type: value.Auto}},
		items: make([]item, 1), fn: func(_ int, v value.VQT) { got = append(got, v) }}
	s := &session{d: d}
	now := time.Now().UTC().Truncate(100) // OPC UA times are whole 100 ns ticks, as gopcua decodes them
	msg := func(seq uint32, v float64, src time.Time) *ua.NotificationMessage {
		return &ua.NotificationMessage{SequenceNumber: seq, NotificationData: []*ua.ExtensionObject{{Value: &ua.DataChangeNotification{
			MonitoredItems: []*ua.MonitoredItemNotification{{ClientHandle: 1, Value: &ua.DataValue{
				EncodingMask: ua.DataValueValue | ua.DataValueSourceTimestamp, Value: ua.MustVariant(v), SourceTimestamp: src}}}}}}}
	}
	s.deliverMessage(g, msg(5, 1, now.Add(24*time.Hour))) // device clock a day ahead
	s.deliverMessage(g, msg(6, 2, now))                   // clock corrected: must not be held back
	s.deliverMessage(g, msg(4, 3, now))                   // a late answer of an older request: stale
	s.deliverMessage(g, msg(math.MaxUint32, 4, now))      // before 6? no: far behind: stale
	var vals []any
	for _, v := range got {
		vals = append(vals, v.Value)
	}
	if len(got) != 2 || got[0].Value != 1.0 || got[1].Value != 2.0 {
		t.Fatalf("delivered %v, want [1 2]", vals)
	}
	if !strings.Contains(got[0].Reason, "ahead of the gateway clock") || !got[0].Time.After(now.Add(23*time.Hour)) {
		t.Errorf("the future timestamp is not kept as data with a reason: %+v", got[0])
	}
	// The sequence wraps from 4294967295 to 1 (Part 4 §7.38).
	g.items[0] = item{}
	got = nil
	s.deliverMessage(g, msg(math.MaxUint32, 5, now))
	s.deliverMessage(g, msg(1, 6, now))
	if len(got) != 2 {
		t.Fatalf("across the wrap: %d delivered, want 2", len(got))
	}
}

func TestToVariant_DateTimeLimits(t *testing.T) {
	ti := typeInfo{builtin: ua.TypeIDDateTime, writable: true}
	if v, err := toVariant(ti, ""); err != nil || !v.Value().(time.Time).IsZero() {
		t.Fatalf("no date: %v, %v", v, err)
	}
	for _, s := range []string{"9999-12-31T23:59:59Z", "1650-01-01T00:00:00Z"} {
		if _, err := toVariant(ti, s); err == nil || value.CoerceQuality(err) != value.BadOutOfRange {
			t.Errorf("%s: %v, want Bad_OutOfRange (gopcua would wrap it)", s, err)
		}
	}
	if _, err := toVariant(ti, "2024-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
}

// A non-finite Double comes through the driver as sent: the tag engine's
// one rule makes it Bad_OutOfRange (or Uncertain with non_finite: pass),
// for OPC UA as for every driver. Register-string options are Modbus's.
func TestDriver_NonFiniteAndStringOptions(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := vqtOf(&ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(f)}, value.Float64)
		if value.NonFinite(v.Value) == "" || v.Quality != value.Good {
			t.Errorf("%v: %+v, want the raw value for the engine", f, v)
		}
		v = vqtOf(&ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(float32(f))}, value.Float32)
		if value.NonFinite(v.Value) == "" {
			t.Errorf("Float %v: %+v", f, v)
		}
	}
	d := NewDriver("ua", DefaultConfig, nil)
	for _, p := range []device.Point{
		{Address: "ns=2;s=X", Type: value.String, Encoding: "latin1"},
		{Address: "ns=2;s=X", Type: value.String, StringByteOrder: "low"},
	} {
		if err := d.CheckPoint(p); err == nil {
			t.Errorf("CheckPoint(%+v) = nil", p)
		}
	}
}
