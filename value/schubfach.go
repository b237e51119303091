package value

import (
	"math"
	"math/big"
	"math/bits"
)

// The shortest decimal of a float32, by Schubfach (R. Giulietti, "The
// Schubfach way to render doubles", 2020; the float variant, as in the
// JDK's FloatToDecimal since JDK 19): the digits s and the exponent k of
// the shortest decimal s·10^k in the float's rounding interval, the one
// closest to it when several are as short, ties to even s, found with one
// 64×64-bit multiplication per bound instead of a search over digit
// counts. The interval's ends are included when the float's significand
// is even (round half to even, IEEE 754 §4.3.1), as strconv's shortest
// formatting does, so s·10^k is the decimal strconv.FormatFloat(f, 'e',
// -1, 32) prints (value/schubfach_test.go checks every float32).

const (
	f32P     = 24        // float32 precision, hidden bit included
	f32QMin  = -149      // the exponent of the least subnormal: 2^-149
	f32CMin  = 1 << 23   // the least normal significand
	f32CTiny = 8         // the least subnormal significand Schubfach's estimates hold for
	f32BQMax = 1<<8 - 1  // the biased exponent of infinities and NaNs
	f32TMask = 1<<23 - 1 // the trailing significand bits
	mask32   = 1<<32 - 1 // the low 32 bits
	g1KMin   = -46       // the least power of ten g1 holds: a float32's decimals reach 10^-46
	g1KMax   = 46        // the largest: toDecimal32's 10^-k reaches 10^(45+1)
	g1Len    = g1KMax - g1KMin + 1
)

// flog10pow2 is ⌊q·log10(2)⌋ for |q| ≤ 5,456,721 (Schubfach §5: the
// constant is ⌊log10(2)·2^41⌋).
func flog10pow2(q int) int { return int(int64(q) * 661_971_961_083 >> 41) }

// flog10threeQuartersPow2 is ⌊log10(3/4·2^q)⌋ (Schubfach §5).
func flog10threeQuartersPow2(q int) int {
	return int((int64(q)*661_971_961_083 - 274_743_187_321) >> 41)
}

// flog2pow10 is ⌊e·log2(10)⌋ for |e| ≤ 1,233,250 (Schubfach §5).
func flog2pow10(e int) int { return int(int64(e) * 913_124_641_741 >> 38) }

// g1Table holds g1 for 10^e at index e - g1KMin (93 entries, computed at
// start-up: about 50 µs).
var g1Table = initG1()

// initG1 returns g1Table: for each e, the upper 63 bits of the 126-bit
// g = ⌊10^e·2^-r⌋ + 1 with r = flog2pow10(e) - 125, so that 2^125 ≤ g <
// 2^126 (Schubfach §9, the table of the JDK's MathUtils), computed with
// math/big.
func initG1() (t [g1Len]uint64) {
	ten := big.NewInt(10)
	for e := g1KMin; e <= g1KMax; e++ {
		shift := 125 - flog2pow10(e) // -r
		g := new(big.Int)
		p := new(big.Int).Exp(ten, big.NewInt(int64(max(e, -e))), nil)
		switch {
		case e >= 0 && shift >= 0:
			g.Lsh(p, uint(shift))
		case e >= 0:
			g.Rsh(p, uint(-shift))
		default: // 2^shift / 10^-e, shift > 125
			g.Quo(new(big.Int).Lsh(big.NewInt(1), uint(shift)), p)
		}
		g.Add(g, big.NewInt(1))
		t[e-g1KMin] = new(big.Int).Rsh(g, 63).Uint64()
	}
	return t
}

// shortest32 returns the shortest decimal s·10^k of the positive finite
// float32 whose bits are b (sign bit clear, b ≠ 0, not a subnormal with a
// significand below f32CTiny): s < 10^9 may end in zeros.
func shortest32(b uint32) (s uint64, k int) {
	t := b & f32TMask
	bq := int(b >> (f32P - 1))
	if bq != 0 {
		mq := -f32QMin + 1 - bq // -q
		c := uint32(f32CMin) | t
		if 0 < mq && mq < f32P { // an integer below 2^24: itself
			if f := c >> mq; f<<mq == c {
				return uint64(f), 0
			}
		}
		return toDecimal32(-mq, c)
	}
	return toDecimal32(f32QMin, t)
}

// toDecimal32 is Schubfach's toDecimal for c·2^q: the rounding interval's
// bounds and the value itself, scaled by 10^-k, each as rop's rounded-odd
// estimate, and the shortest decimal among the multiples of 10 and the
// two integers around the value (Schubfach §8).
func toDecimal32(q int, c uint32) (uint64, int) {
	out := uint64(c & 1)
	cb := uint64(c) << 2
	cbr := cb + 2
	var cbl uint64
	var k int
	if c != f32CMin || q == f32QMin {
		cbl = cb - 2
		k = flog10pow2(q)
	} else { // a power of two: the interval below is half as wide
		cbl = cb - 1
		k = flog10threeQuartersPow2(q)
	}
	h := uint(q + flog2pow10(-k) + 33)
	g := g1Table[-k-g1KMin] + 1
	vb := rop(g, cb<<h)
	vbl := rop(g, cbl<<h)
	vbr := rop(g, cbr<<h)
	s := vb >> 2
	if s >= 10 { // the JDK takes s >= 100: its toString prints at least two digits
		sp10 := 10 * (s * 1_717_986_919 >> 34) // 10·⌊s/10⌋
		tp10 := sp10 + 10
		upin := vbl+out <= sp10<<2
		wpin := tp10<<2+out <= vbr
		if upin != wpin {
			if upin {
				return sp10, k
			}
			return tp10, k
		}
	}
	t := s + 1
	uin := vbl+out <= s<<2
	win := t<<2+out <= vbr
	if uin != win {
		if uin {
			return s, k
		}
		return t, k
	}
	cmp := int64(vb) - int64((s+t)<<1)
	if cmp < 0 || cmp == 0 && s&1 == 0 && (c != f32CMin || q == f32QMin || q == -77) {
		// A tie between s and t goes to the even one, except at a power
		// of two (other than 2^-54): there it goes up, as strconv's
		// Dragonbox rounds the shorter interval's value (Jeon,
		// "Dragonbox", 2020, §5.3; Go's internal/strconv/ftoadbox.go).
		return s, k
	}
	return t, k
}

// rop is Schubfach's rounding to odd of g·cp·2^-95: the product's upper
// 64 bits shifted right by 31, the lowest bit set when any bit below was.
func rop(g, cp uint64) uint64 {
	x1, _ := bits.Mul64(g, cp)
	vbp := x1 >> 31
	return vbp | ((x1&mask32)+mask32)>>32
}

// shortestFloat32 is Float32Decimal without formatting: the float64
// nearest to f's shortest decimal s·10^k (shortest32), one exact
// operation when 10^|k| is exact (Clinger's fast path: "How to read
// floating point numbers accurately", PLDI 1990), decimalToFloat64
// otherwise. ok is false for zero, the seven least subnormals, NaN and
// the infinities, and where decimalToFloat64 cannot be certain of the
// rounding: Float32Decimal formats and parses those.
func shortestFloat32(f float32) (float64, bool) {
	b := math.Float32bits(f)
	mag := b &^ (1 << 31)
	if mag < f32CTiny || mag>>(f32P-1) == f32BQMax {
		// Zero, the seven least subnormals (which the JDK scales by 10,
		// for its two-digit minimum), NaN and the infinities.
		return 0, false
	}
	s, k := shortest32(mag)
	var d float64
	switch {
	case k >= 0 && k <= 22:
		d = float64(s) * pow10[k]
	case k < 0 && k >= -22:
		d = float64(s) / pow10[-k]
	default:
		var ok bool
		if d, ok = decimalToFloat64(s, k); !ok {
			return 0, false
		}
	}
	if b>>31 != 0 {
		d = -d
	}
	return d, true
}

// decimalToFloat64 is the float64 nearest to s·10^k (0 < s < 2^32, k
// within g1's table), or ok false when that cannot be told for certain
// (then about one value in 500). As in Eisel and Lemire's conversion
// (Lemire, "Number parsing at a gigabyte per second", 2021, §5): s times
// g1(k), the upper 63 bits of 10^k, is the value scaled by a power of two
// to within s units of its last place, which leaves about 9 bits below
// float64's 53 to decide the rounding; ok is false when the value's
// uncertainty reaches the half-way point of two float64s.
func decimalToFloat64(s uint64, k int) (float64, bool) {
	if s == 0 || s >= 1<<32 || k < g1KMin || k > g1KMax {
		return 0, false
	}
	g1 := g1Table[k-g1KMin]
	// 10^k·2^-r lies in [g1·2^63 - 1, (g1+1)·2^63) (initG1), so s·10^k lies
	// in [P - s·2^-63, P + s)·2^(r+63), P = s·g1 (below 2^95).
	hi, lo := bits.Mul64(s, g1)
	n := 128 - bits.LeadingZeros64(hi) // P's bits, 63 to 95
	if hi == 0 {
		n = 64 - bits.LeadingZeros64(lo)
	}
	shift := uint(n - 53) // the bits below float64's 53: 10 to 42
	kept := hi<<(64-shift) | lo>>shift
	dropped := lo & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	// The true dropped part is within [dropped - 1, dropped + s).
	if dropped+s >= half && dropped <= half+1 {
		return 0, false // too near the half-way point to be certain
	}
	if dropped > half {
		kept++
		if kept == 1<<53 {
			kept >>= 1
			shift++
		}
	}
	r := flog2pow10(k) - 125
	e2 := int(shift) + r + 63 // the value is kept·2^e2, 2^52 ≤ kept < 2^53
	return math.Float64frombits(uint64(e2+52+1023)<<52 | kept&(1<<52-1)), true
}
