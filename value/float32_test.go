package value

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestFloat32Decimal_ShortestAndBitExact: a float32 is held as its shortest
// decimal (docs/values.md, "Types"), which converts back to the same
// float32 bit for bit, over the examples of the docs and a random sample of
// every bit pattern.
func TestFloat32Decimal_ShortestAndBitExact(t *testing.T) {
	for _, tt := range []struct {
		bits uint32
		want float64
	}{
		{0x3DCCCCCD, 0.1}, {0x41200000, 10}, {0xC2F6E979, -123.456}, {0x00000000, 0}, {0x7F7FFFFF, 3.4028235e38},
	} {
		if got := Float32Decimal(math.Float32frombits(tt.bits)); got != tt.want {
			t.Errorf("Float32Decimal(%#08x) = %v, want %v", tt.bits, got, tt.want)
		}
	}
	for _, tt := range []struct{ in, want float64 }{{12.345678, 12.345678}, {0.1000000001, 0.1}, {0.1, 0.1}} {
		got, err := Coerce(Float32, tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Coerce(float32, %v) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	for range 1_000_000 {
		b := r.Uint32()
		f := math.Float32frombits(b)
		d := Float32Decimal(f)
		if math.IsNaN(d) {
			continue
		}
		if got := math.Float32bits(float32(d)); got != b {
			t.Fatalf("float32(Float32Decimal(%#08x)) = %#08x: not the same float32", b, got)
		}
		if !Conforms(Float32, d) || !Conforms(Float32, float64(f)) {
			t.Fatalf("%#08x: the decimal %v or the exact %v does not conform to float32", b, d, float64(f))
		}
	}
	if Conforms(Float32, 0.1000000001) {
		t.Error("0.1000000001 is not a float32 value (neither exact nor a shortest decimal) but conforms")
	}
}

// float32DecimalRef is Float32Decimal by its definition: the shortest
// decimal, formatted and parsed back.
func float32DecimalRef(f float32) float64 {
	d, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		panic(err)
	}
	return d
}

// TestFloat32Decimal_MatchesDefinition: the conversion without a parse
// (shortestFloat32) gives the same float64, bit for bit, as formatting the
// shortest decimal and parsing it, for mantissas drawn at random under
// every exponent, the first and last mantissas of each, and the
// subnormals.
func TestFloat32Decimal_MatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	check := func(b uint32) {
		f := math.Float32frombits(b)
		got, want := Float32Decimal(f), float32DecimalRef(f)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("Float32Decimal(%#08x) = %v, want %v", b, got, want)
		}
	}
	for exp := uint32(0); exp < 255; exp++ {
		for sign := uint32(0); sign < 2; sign++ {
			base := sign<<31 | exp<<23
			for m := uint32(0); m < 64; m++ {
				check(base | m)
				check(base | (1<<23 - 1 - m))
			}
			for range 2000 {
				check(base | r.Uint32N(1<<23))
			}
		}
	}
}

// BenchmarkFloat32Decimal: "registers" are bench-devices' float32s (two
// registers counting up: mostly tiny values, whose decimals need a scaled
// power of ten), "process" values a plant reads (0.01 to 10,000).
func BenchmarkFloat32Decimal(b *testing.B) {
	regs := make([]float32, 1024)
	proc := make([]float32, 1024)
	for i := range regs {
		regs[i] = math.Float32frombits(uint32(i*7)<<16 | uint32(i*7+7))
		proc[i] = float32(math.Pow(10, float64(i%7)-2) * (1 + float64(i)/1024))
	}
	for _, c := range []struct {
		name string
		fs   []float32
	}{{"registers", regs}, {"process", proc}} {
		b.Run(c.name, func(b *testing.B) {
			var sum float64
			for i := range b.N {
				sum += Float32Decimal(c.fs[i&1023])
			}
			_ = sum
		})
	}
}
