package mqtt

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// TestAppendTagMsg_SameBytesAsJSONMarshal: the hand-written per-tag
// payload is byte for byte what json.Marshal made of tagMsg, for every
// kind of tag value, quality, time and reason.
func TestAppendTagMsg_SameBytesAsJSONMarshal(t *testing.T) {
	values := []value.Value{nil, true, false, int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64),
		uint64(math.MaxUint64), 0.0, math.Copysign(0, -1), 1.5, -123456.789, 1e-7, 1.2345e-9, 1e20, 1e21, 3e300,
		math.SmallestNonzeroFloat64, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1), 123456.78901234567,
		"", "plain", "quote \" backslash \\ <b>&amp; \n\t\x01 ünï €", []any{int64(1), 2.5, "x", math.NaN(), []any{true}},
		int(7), float32(0.1), struct{}{}}
	times := []time.Time{{}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600)), time.Date(2026, 12, 1, 10, 0, 0, 120000000, time.UTC)}
	reasons := []string{"", "device timeout", "<&> \"x\""}
	qualities := []value.Quality{value.Good, value.BadTimeout, value.Quality(200)}
	n := 0
	for _, v := range values {
		for _, ts := range times {
			for _, r := range reasons {
				for _, q := range qualities {
					raw, _ := value.EncodeJSON(v)
					want, err := json.Marshal(tagMsg{V: raw, Q: q.String(), T: stamp(ts), Seq: uint64(1764583200000000 + n), Reason: r})
					if err != nil {
						t.Fatal(err)
					}
					got := appendTagMsg([]byte("prefix"), v, q, stamp(ts), uint64(1764583200000000+n), r)
					if string(got) != "prefix"+string(want) {
						t.Errorf("%#v %v %q %v:\n got %s\nwant prefix%s", v, ts, r, q, got, want)
					}
					n++
				}
			}
		}
	}
}

// TestStamper_OncePerInstant: equal instants give the same text, a new
// instant its own, the zero time the empty text.
func TestStamper_OncePerInstant(t *testing.T) {
	var s stamper
	a := time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{{a, stamp(a)}, {a.In(time.FixedZone("x", 7200)), stamp(a)}, {a.Add(time.Millisecond), stamp(a.Add(time.Millisecond))},
		{time.Time{}, ""}, {a, stamp(a)}} {
		if got := s.stamp(c.t); got != c.want {
			t.Errorf("stamp(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}
