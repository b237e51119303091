package value

import (
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// checkFloat32Range compares Float32Decimal with its definition
// (float32DecimalRef: strconv's shortest decimal, parsed back) bit for bit
// for the float32 bit patterns lo..hi-1 spread over every CPU, and reports
// the first few that differ.
func checkFloat32Range(t *testing.T, lo, hi uint64, step uint64) {
	t.Helper()
	workers := uint64(runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	var bad []uint32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for b := lo + w*step; b < hi; b += workers * step {
				f := math.Float32frombits(uint32(b))
				got, want := Float32Decimal(f), float32DecimalRef(f)
				if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
					mu.Lock()
					if len(bad) < 5 {
						bad = append(bad, uint32(b))
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, b := range bad {
		f := math.Float32frombits(b)
		t.Errorf("Float32Decimal(%#08x) = %v, want %v (%s)", b, Float32Decimal(f), float32DecimalRef(f),
			strconv.FormatFloat(float64(f), 'e', -1, 32))
	}
}

// TestShortest32_SubnormalsAndPowersOfTwo: the two places where the
// shortest-decimal search leaves its usual shape, each float32 of them:
// every subnormal (the rounding interval of the smallest holds decimals of
// one digit, which the JDK's Schubfach would print with two) and every
// power of two (the interval below is half the one above, and a tie goes
// up), both signs.
func TestShortest32_SubnormalsAndPowersOfTwo(t *testing.T) {
	checkFloat32Range(t, 0, 1<<23, 1)
	checkFloat32Range(t, 1<<31, 1<<31|1<<23, 97) // negative subnormals, sampled
	for e := uint32(1); e < f32BQMax; e++ {
		for _, sign := range []uint32{0, 1 << 31} {
			for _, m := range []uint32{0, 1, 2} { // the power, and just above it
				b := uint64(sign | e<<23 | m)
				checkFloat32Range(t, b, b+1, 1)
			}
		}
	}
}

// TestShortest32_Ties: the float32s with an exact decimal one digit longer
// than their shortest (a tie between two shortest candidates: the
// significand's low bits all zero, so the value has few binary digits).
func TestShortest32_Ties(t *testing.T) {
	for e := uint32(1); e < f32BQMax; e++ {
		for m := uint32(0); m < 1<<23; m += 1 << 15 {
			b := uint64(e<<23 | m)
			checkFloat32Range(t, b, b+1, 1)
		}
	}
}
