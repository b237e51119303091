package config

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// importCSV is a tag CSV of n rows like a plant's export (some 40 bytes a
// row): 100,000 rows are the 4 MB file that once took the daemon from 50 to
// 1,561 MiB.
func importCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString("path,device,address,type,scan,units\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "Line%d/Cell%d/T%d,plc1,HR%d,int16,1s,rpm\n", i/10000, i/100%100, i, i%60000)
	}
	return b.Bytes()
}

// peakHeap samples the live heap while fn runs and returns the highest
// value seen above the heap before fn (after a GC).
func peakHeap(fn func()) (peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var max atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > base && m.HeapAlloc-base > max.Load() {
					max.Store(m.HeapAlloc - base)
				}
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return max.Load()
}

// BenchmarkImport_BytesPerTag measures a tag import as the daemon does it
// (ReadTagsCSV, UpsertTags into the running project, ParseProject of the
// result, EngineTags) for 100,000 rows, and reports the bytes allocated per
// tag, the peak live heap per tag, and the live heap the resulting tag set
// keeps per tag (its own footprint), so that peak_per_tag ÷ kept_per_tag is
// the "small multiple" the import must stay within.
func BenchmarkImport_BytesPerTag(b *testing.B) {
	const n = 100000
	csv := importCSV(n)
	project := []byte("devices:\n  - {name: plc1, driver: modbus, url: \"tcp://10.0.0.5:502\"}\ntags:\n")
	var peak uint64
	var kept []TagConfig
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		peak = max(peak, peakHeap(func() {
			rows, err := ReadTagsCSV(bytes.NewReader(csv), TagImport{})
			if err != nil {
				b.Fatal(err)
			}
			doc, err := UpsertTags(project, rows)
			if err != nil {
				b.Fatal(err)
			}
			rows = nil
			p, err := ParseProject(doc)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.EngineTags(); err != nil {
				b.Fatal(err)
			}
			kept = p.Tags
		}))
	}
	b.StopTimer()
	runtime.GC()
	var with, without runtime.MemStats
	runtime.ReadMemStats(&with)
	if len(kept) != n {
		b.Fatalf("%d tags imported, want %d", len(kept), n)
	}
	kept = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	keptPerTag := float64(with.HeapAlloc-min(with.HeapAlloc, without.HeapAlloc)) / n
	b.ReportMetric(float64(peak)/n, "peak_B/tag")
	b.ReportMetric(keptPerTag, "kept_B/tag")
	if keptPerTag > 0 {
		b.ReportMetric(float64(peak)/n/keptPerTag, "peak/kept_ratio")
	}
	b.ReportMetric(float64(len(csv))/n, "csv_B/tag")
}
