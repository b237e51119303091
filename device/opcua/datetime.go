package opcua

import (
	"fmt"
	"math"
	"time"
)

// OPC UA DateTime (Part 6 §5.2.2.5) is a signed 64-bit count of 100 ns
// ticks since 1601-01-01T00:00:00Z. gopcua v0.8.0 decodes it as
// time.Unix(0, int64((ticks-epochTicks)*100)) in uint64 arithmetic
// (ua.Buffer.ReadTime), which wraps for any date outside the int64
// nanoseconds of 1677-09-21 to 2262-04-11: a server's maximum date, a date
// near 1601 or Int64.MinValue come out as other, wrong dates. Zero ticks
// come out as the zero time.Time. This file recovers the raw ticks from
// what gopcua decoded and applies the specification's rules in our layer;
// see ticksOf.
//
// The rules (Part 6 §5.2.2.5): 0, and every value at or before the
// minimum 1601-01-01T00:00:00Z, is "no date"; Int64.MaxValue, and every
// value at or after 9999-12-31T23:59:59Z, is the maximum, which "should
// be treated as invalid". We hold every date in between exactly.

const (
	// epochTicks is 1970-01-01T00:00:00Z in DateTime ticks.
	epochTicks = 116444736000000000
	// maxDateTicks is 9999-12-31T23:59:59Z, the OPC UA maximum:
	// (253402300799 s + 11644473600 s) × 10^7.
	maxDateTicks = 2650467743990000000
	mask62       = 1<<62 - 1
)

// inv25 is the inverse of 25 modulo 2^64 (25 × inv25 ≡ 1).
var inv25 = func() uint64 {
	x := uint64(1)
	for range 6 { // Newton: each step doubles the correct low bits
		x *= 2 - 25*x
	}
	return x
}()

// MaxDateTime is the largest date OPC UA encodes as a date (Part 6
// §5.2.2.5): 9999-12-31T23:59:59Z. A value at or beyond it is clamped to it.
var MaxDateTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// ticksOf recovers the raw DateTime ticks that gopcua v0.8.0 decoded into t
// (see the file comment); ok is false for the zero time (0 ticks). t must
// come from gopcua's decoder (or be a whole number of 100 ns ticks, as
// every OPC UA time is).
//
// gopcua computed y = (ticks - epochTicks) × 100 mod 2^64. 100 = 4 × 25
// and 25 is invertible modulo 2^64, so (ticks - epochTicks) mod 2^62 =
// (y / 4) × 25⁻¹ mod 2^62: the ticks are exact modulo 2^62 ticks (about
// 14,600 years). Every date OPC UA can encode (0 to 9999-12-31, under 2^62
// ticks) is therefore recovered exactly; Int64.MaxValue comes back above
// maxDateTicks and Int64.MinValue as 0, which the rules map to the
// maximum and to "no date" as the specification asks. Only encodings that
// no conforming server sends (years 16212 to 26211, negative ticks other
// than Int64.MinValue) alias to another date.
func ticksOf(t time.Time) (ticks int64, ok bool) {
	if t.IsZero() {
		return 0, false
	}
	y := t.UnixNano()
	if uint64(y)%4 != 0 {
		// Not a value gopcua produced (its nanoseconds are ×100 mod 2^64):
		// a time made in our own code. Take it at its word.
		return y/100 + epochTicks, true
	}
	x := ((uint64(y) >> 2) * inv25) & mask62
	return int64((x + epochTicks) & mask62), true
}

// dateKind is what a DateTime holds after the rules.
type dateKind uint8

const (
	dateValid dateKind = iota // a date between the minimum and the maximum
	dateNone                  // 0 ticks or at/before 1601-01-01: no date
	dateMax                   // at or beyond the maximum: clamped to MaxDateTime
)

// dateOf applies Part 6 §5.2.2.5 to a DateTime as gopcua decoded it.
func dateOf(t time.Time) (time.Time, dateKind) {
	ticks, ok := ticksOf(t)
	switch {
	case !ok || ticks <= 0:
		return time.Time{}, dateNone
	case ticks >= maxDateTicks:
		return MaxDateTime, dateMax
	}
	d := ticks - epochTicks
	return time.Unix(d/1e7, d%1e7*100).UTC(), dateValid
}

// storable reports whether t fits the unix nanoseconds the data path keeps
// times in (history, last values): 1677-09-21 to 2262-04-11.
func storable(t time.Time) bool {
	return !t.Before(minStorable) && !t.After(maxStorable)
}

var minStorable, maxStorable = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// futureSlack is how far ahead of the gateway's clock a source timestamp
// may lie before the reason says so: clocks of devices and gateways
// differ by seconds, not minutes, when both are synchronised.
const futureSlack = time.Minute

// stamp applies the rules to a DataValue timestamp (source or server, as
// gopcua decoded it) against now: the time to use, or zero for none, and a
// note for the reason when the device's timestamp is unusable (outside
// what the data path can store: the arrival time is used instead) or
// implausible (in the future: kept as sent, as data).
func stamp(t, now time.Time, which string) (time.Time, string) {
	d, kind := dateOf(t)
	switch {
	case kind == dateNone:
		return time.Time{}, ""
	case kind == dateMax || !storable(d):
		return time.Time{}, fmt.Sprintf("%s timestamp %s cannot be stored (outside 1677-09-21..2262-04-11); the arrival time is used",
			which, d.Format(time.RFC3339Nano))
	case d.After(now.Add(futureSlack)):
		return d, fmt.Sprintf("%s timestamp lies more than %s ahead of the gateway clock (device clock wrong?); kept as sent", which, futureSlack)
	}
	return d, ""
}
