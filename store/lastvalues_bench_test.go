package store

import (
	"fmt"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// BenchmarkPutLastValues100k is the tag engine's last-values save of a
// 100,000-point plant (bench-devices) where every value changed: one
// PutLastValues of 100,000 sorted paths into a store already holding them.
// scratch-B is what the DB keeps for the next save.
func BenchmarkPutLastValues100k(b *testing.B) { benchPutLastValues(b, 100000) }

// BenchmarkPutLastValues10k is BenchmarkPutLastValues100k for a plant of
// 10,000 points.
func BenchmarkPutLastValues10k(b *testing.B) { benchPutLastValues(b, 10000) }

func benchPutLastValues(b *testing.B, n int) {
	db := openTest(b)
	paths := make([]string, n)
	vals := make([]value.VQT, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("dev%03d/hr%05d", i/1000, i%1000)
	}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i := range vals {
		vals[i] = value.VQT{Value: float64(i) * 1.5, Quality: value.Good, Time: t0}
	}
	if err := db.PutLastValues(paths, vals); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range vals {
			vals[j] = value.VQT{Value: float64(j+i) * 1.25, Quality: value.Good, Time: t0.Add(time.Duration(i+1) * time.Second)}
		}
		b.StartTimer()
		if err := db.PutLastValues(paths, vals); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if s := db.lvScratch.p.Load(); s != nil {
		b.ReportMetric(float64(s.retained()), "scratch-B")
	}
}
