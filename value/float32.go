package value

import (
	"math"
	"math/big"
	"strconv"
	"sync"
)

// Float32Decimal is the value a float32 tag holds for the float32 f: the
// float64 nearest to the shortest decimal that reads back as f
// (strconv.FormatFloat(f, 'g', -1, 32)), so a register holding 0.1f is
// 0.1, not 0.10000000149011612, in every answer (REST, WebSocket, MQTT,
// history, scripts), as OPC UA and Modbus clients show a Float/REAL.
// float32 of the result is f again, bit for bit: float64 carries more than
// twice float32's precision plus two bits, so rounding the decimal first to
// float64 and then to float32 is the same as rounding it to float32
// (docs/values.md, "Types"). NaN and the infinities are returned as they
// are.
func Float32Decimal(f float32) float64 {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	// Integers below 2^24 are their own shortest decimal.
	if t := math.Trunc(x); t == x && math.Abs(x) < 1<<24 {
		return x
	}
	if d, ok := shortestFloat32(f); ok {
		return d
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], x, 'e', -1, 32)
	if d, ok := exactDecimal(s); ok {
		return d
	}
	d, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return x // cannot happen: AppendFloat's output parses
	}
	return d
}

// pow10 are the powers of ten that float64 holds exactly (10^22 is the
// last: 5^22 < 2^53).
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactDecimal converts s, strconv's 'e' form of a float32's shortest
// decimal ("-1.2345678e-05": at most 9 digits), to the nearest float64
// when one IEEE multiplication or division does it exactly rounded: the
// digits as an integer m < 2^53 and 10^|e| ≤ 10^22 are both exact, so
// m·10^e or m/10^-e is the correctly rounded result (Clinger, "How to
// read floating point numbers accurately", PLDI 1990; the fast path of
// strconv.ParseFloat). ok is false for other exponents (below 10^-22 or
// far above 10^22), which ParseFloat converts.
func exactDecimal(s []byte) (d float64, ok bool) {
	i, neg := 0, false
	if len(s) > 0 && s[0] == '-' {
		neg, i = true, 1
	}
	var m uint64
	digits := 0
	for ; i < len(s) && s[i] != 'e'; i++ {
		if c := s[i]; c != '.' {
			if c < '0' || c > '9' {
				return 0, false
			}
			m = m*10 + uint64(c-'0')
			digits++
		}
	}
	if i+2 >= len(s) || digits == 0 || digits > 15 {
		return 0, false
	}
	expNeg := s[i+1] == '-'
	exp := 0
	for _, c := range s[i+2:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		exp = exp*10 + int(c-'0')
	}
	if expNeg {
		exp = -exp
	}
	e := exp - (digits - 1)
	if e > 22 && digits+e-22 <= 15 {
		// m·10^(e-22) still below 10^15 < 2^53: exact as an integer.
		for ; e > 22; e-- {
			m *= 10
		}
	}
	switch {
	case e >= 0 && e <= 22:
		d = float64(m) * pow10[e]
	case e < 0 && e >= -22:
		d = float64(m) / pow10[-e]
	default:
		if d, ok = scaledDecimal(m, e); !ok {
			return 0, false
		}
	}
	if neg {
		d = -d
	}
	return d, true
}

// pow10DD holds 10^e for e = -pow10DDMax..pow10DDMax as hi + lo: hi the
// float64 nearest to 10^e, lo the float64 nearest to the rest (10^e to
// about 106 bits; lo is 0 where hi is exact), computed once with
// math/big. The exponents cover a float32's decimals: 10^-45 (the
// smallest subnormal) over 10^10 (the most digits a probe takes), up to
// 3.4·10^38.
var (
	pow10DDOnce sync.Once
	pow10DD     [2*pow10DDMax + 1][2]float64 // index e + pow10DDMax
)

const pow10DDMax = 57

func initPow10DD() {
	ten := big.NewInt(10)
	for e := -pow10DDMax; e <= pow10DDMax; e++ {
		exact := new(big.Float).SetPrec(400)
		p := new(big.Int).Exp(ten, big.NewInt(int64(abs(e))), nil)
		if e >= 0 {
			exact.SetInt(p)
		} else {
			exact.Quo(new(big.Float).SetPrec(400).SetInt64(1), new(big.Float).SetPrec(400).SetInt(p))
		}
		hi, _ := exact.Float64()
		rest := new(big.Float).SetPrec(400).Sub(exact, new(big.Float).SetPrec(400).SetFloat64(hi))
		lo, _ := rest.Float64()
		pow10DD[e+pow10DDMax] = [2]float64{hi, lo}
	}
}

// p10 returns 10^e as hi + lo (pow10DD); e within ±pow10DDMax.
func p10(e int) [2]float64 {
	pow10DDOnce.Do(initPow10DD)
	return pow10DD[e+pow10DDMax]
}

func abs(e int) int {
	if e < 0 {
		return -e
	}
	return e
}

// scaledDecimal is the float64 nearest to m·10^e (m < 2^53) for the
// exponents beyond the exact powers: m·(hi + lo) evaluated to about 100
// bits with an exact product (FMA) and an exact sum (Knuth's TwoSum), then
// rounded once. ok is false when that value lies too near the midpoint of
// two float64s for the rounding to be certain (and for exponents outside
// the table): ParseFloat decides those.
func scaledDecimal(m uint64, e int) (float64, bool) {
	if e < -pow10DDMax || e > pow10DDMax || m >= 1<<53 {
		return 0, false
	}
	pw := p10(e)
	fm := float64(m)
	p := fm * pw[0]
	perr := math.FMA(fm, pw[0], -p) // m·hi = p + perr exactly
	t := perr + fm*pw[1]            // the rest, to ~2^-50 of itself
	r := p + t
	// p + t = r + rerr exactly (TwoSum).
	bp := r - t
	rerr := (p - bp) + (t - (r - bp))
	// The value is p + t + δ with |δ| well below 2^-100·|r|: r is its
	// nearest float64 unless p + t is within that of a midpoint.
	// Half the gap to r's neighbour on rerr's side (r > 0: its bits ± 1).
	rb := math.Float64bits(r)
	half := (math.Float64frombits(rb+1) - r) / 2
	if rerr < 0 {
		half = (r - math.Float64frombits(rb-1)) / 2
	}
	if math.Abs(math.Abs(rerr)-half) <= math.Abs(r)*0x1p-98 {
		return 0, false
	}
	return r, true
}

// log10of2 is log10(2), for the decimal exponent of a binary one.
const log10of2 = 0.30102999566398119521

// shortestFloat32 is Float32Decimal without formatting: it finds the
// shortest decimal n·10^k in f's rounding interval (the reals that round
// to f: within half the gap to its neighbours; its ends, included when
// f's mantissa is even, are left to strconv) by its granularity k, the largest k for which n, the
// integer nearest to |f|/10^k, lies inside; that n is the closest to f of
// the shortest, as strconv's shortest formatting picks (Steele & White,
// "How to print floating-point numbers accurately", PLDI 1990: the
// interval; a finer k keeps a candidate inside, so the largest is found by
// trying the digit counts around the usual eight). Each probe computes
// |f|/10^k to about 100 bits (10^-k as two float64s, an exact product by
// FMA). ok is false, and Float32Decimal formats and parses instead, where
// a probe lands too near a rounding decision to be certain of it (the
// half-way point between two integers, the end of the interval), for a
// power of two (its interval is not symmetric) and where the conversion
// of n·10^k to float64 is not certain (scaledDecimal).
func shortestFloat32(f float32) (float64, bool) {
	b := math.Float32bits(f)
	exp32, mant := int(b>>23&0xFF), b&(1<<23-1)
	if mant == 0 || exp32 == 0xFF {
		return 0, false
	}
	x := math.Abs(float64(f))
	half := 0x1p-150 // half the gap to the neighbours: subnormals
	if exp32 > 0 {
		half = math.Float64frombits(uint64(exp32-151+1023) << 52) // 2^(exp-127-24)
	}
	e2 := int(math.Float64bits(x)>>52) - 1023 // 2^e2 <= x < 2^(e2+1)
	ehi := int(math.Floor(float64(e2+1) * log10of2))
	// x < 10^(ehi+1): at k = ehi-9 (ten digits or more) n is surely
	// inside, at k = ehi+1 n is 0 or 1 (10^(ehi+1), which may be inside).
	pow10DDOnce.Do(initPow10DD)
	probe := func(k int) (n uint64, in, ok bool) {
		pw := &pow10DD[pow10DDMax-k]
		qh := x * pw[0]
		ql := math.FMA(x, pw[0], -qh) + x*pw[1] // x·10^-k = qh + ql (to ~2^-100)
		fn := math.Round(qh)
		r := (qh - fn) + ql // x·10^-k - fn
		if r > 0.5 {
			fn, r = fn+1, r-1
		} else if r < -0.5 {
			fn, r = fn-1, r+1
		}
		ar := math.Abs(r)
		if math.Abs(ar-0.5) < 1e-6 {
			return 0, false, false // near half-way between two integers
		}
		t := half*pw[0] + half*pw[1] // half the gap, in units of 10^k
		if math.Abs(ar-t) <= t*1e-9 {
			return 0, false, false // near the end of the interval
		}
		return uint64(fn), ar < t, true
	}
	k := ehi - 7 // eight digits (seven when ehi is one too high)
	n, in, ok := probe(k)
	if !ok {
		return 0, false
	}
	if in {
		for k < ehi+1 { // fewer digits while one still fits
			n2, in2, ok := probe(k + 1)
			if !ok {
				return 0, false
			}
			if !in2 {
				break
			}
			k, n = k+1, n2
		}
	} else {
		for { // more digits until one fits
			if k == ehi-9 {
				return 0, false // cannot happen: nine digits always fit
			}
			k--
			if n, in, ok = probe(k); !ok {
				return 0, false
			}
			if in {
				break
			}
		}
	}
	var d float64
	switch {
	case k >= 0 && k <= 22 && n < 1<<53:
		d = float64(n) * pow10[k]
	case k < 0 && k >= -22 && n < 1<<53:
		d = float64(n) / pow10[-k]
	default:
		if d, ok = scaledDecimal(n, k); !ok {
			return 0, false
		}
	}
	if b>>31 != 0 {
		d = -d
	}
	return d, true
}

// isFloat32Value reports whether x is a value a float32 tag may hold: a
// float32 exactly, or Float32Decimal of one.
func isFloat32Value(x float64) bool {
	if math.IsNaN(x) {
		return true
	}
	f := float32(x)
	return float64(f) == x || Float32Decimal(f) == x
}
