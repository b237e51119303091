//go:build bench

package footprintbench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/bench/harness"
)

// perDevice is the most tags one Modbus device of the benchmark holds: 50,000
// tags are 5 devices (5 connections) of 10,000.
const perDevice = 10000

func envDur(t *testing.T, k string, def time.Duration) time.Duration {
	if v := os.Getenv(k); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Second {
			t.Fatalf("%s=%q: want a duration of 5s or more", k, v)
		}
		return d
	}
	return def
}

// project returns n tags at 1 s, every tenth with history on. Modbus tags
// alternate float32 (2 registers) and uint16, contiguous, perDevice to a
// device on ports[k]; simulator tags are sines with periods of 20 to 60 s.
// Every value changes at every scan (the server's values move each second).
func project(src string, n int, ports []string) string {
	var b strings.Builder
	b.WriteString("devices:\n")
	if src == "sim" {
		b.WriteString("  - {name: sim, driver: sim}\n")
	} else {
		for k := 0; k*perDevice < n; k++ {
			fmt.Fprintf(&b, "  - {name: plc%d, driver: modbus, url: \"tcp://127.0.0.1:%s\", unit_id: 1, timeout: 1s}\n", k, ports[k])
		}
	}
	b.WriteString("tags:\n")
	reg := 0
	for i := range n {
		hist := ""
		if i%10 == 0 {
			hist = ", history: {enabled: true}"
		}
		if src == "sim" {
			fmt.Fprintf(&b, "  - {path: Bench/T%05d/Level, device: sim, address: \"sine(0,100,%ds)\", type: float64, scan: 1s%s}\n", i, 20+i%41, hist)
			continue
		}
		if i%perDevice == 0 {
			reg = 0
		}
		typ, size := "float32", 2
		if i%2 == 1 {
			typ, size = "uint16", 1
		}
		fmt.Fprintf(&b, "  - {path: Bench/T%05d/Level, device: plc%d, address: HR%d, type: %s, scan: 1s%s}\n", i, i/perDevice, reg, typ, hist)
		reg += size
	}
	return b.String()
}

// inUse returns the bytes of the store's pages in use (high-water mark
// less the free pages), read after the daemon stopped.
func inUse(t *testing.T, dir string) float64 {
	db, err := bolt.Open(filepath.Join(dir, "data", "qubiq.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open the store read-only: %v", err)
	}
	defer db.Close()
	var size int64
	if err := db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	return float64(size - int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize))
}

type result struct {
	firstReadyMS, readyMS   float64
	rss, rssMax, hwm, tree  float64 // MiB
	anon, file              float64 // MiB, the steady RSS split
	cpuPct, treeCPUPct      float64 // of one core
	serverCPUPct            float64
	growthMiBh, growthBytes float64
	window                  float64
}

// run measures one source at n tags: a first start (the project is
// imported into a new store) that runs briefly and stops; then a restart
// on the same data, warm-up, and the measured window; the store's pages in
// use after each stop give the growth over the second run.
func run(t *testing.T, src string, n int, warm, window time.Duration) result {
	var ports []string
	var srv *harness.Server
	if src == "modbus" {
		srv = harness.FastModbus(t, (n+perDevice-1)/perDevice, false)
		ports = srv.Ports
	}
	dir := t.TempDir()
	opts := harness.Options{Dir: dir, Project: project(src, n, ports)}
	var r result
	d := harness.Start(t, opts)
	r.firstReadyMS = float64(d.Ready.Microseconds()) / 1000
	time.Sleep(3 * time.Second)
	d.Stop()
	before := inUse(t, dir)

	d = harness.Start(t, opts)
	ran := time.Now().Add(-d.Ready)
	r.readyMS = float64(d.Ready.Microseconds()) / 1000
	time.Sleep(warm)
	var srv0 float64
	if srv != nil {
		srv0 = srv.CPU()
	}
	profiled := harness.ProfileWindow(t, d, fmt.Sprintf("%s-%dk", src, n/1000), window)
	s := harness.Sample(d.PID, 250*time.Millisecond)
	time.Sleep(window)
	w := s.Stop()
	profiled()
	if srv != nil {
		r.serverCPUPct = 100 * (srv.CPU() - srv0) / w.Seconds
	}
	health := d.LogTail(4000)
	d.Stop()
	ranFor := time.Since(ran).Seconds()
	after := inUse(t, dir)
	r.rss, r.rssMax, r.hwm, r.tree = w.RootRSS, w.RootRSSMax, w.RootHWM, w.PeakTreeRSS
	r.anon, r.file = w.RootAnon, w.RootFile
	r.cpuPct, r.treeCPUPct = 100*w.RootCPU/w.Seconds, 100*w.TreeCPU/w.Seconds
	r.growthBytes = after - before
	r.growthMiBh = r.growthBytes / ranFor * 3600 / (1 << 20)
	r.window = ranFor
	if strings.Contains(health, "level=ERROR") {
		t.Logf("%s %d: errors in the log:\n%s", src, n, health)
	}
	return r
}

// TestBenchFootprint: see the package comment and bench/README.md.
func TestBenchFootprint(t *testing.T) {
	warm := envDur(t, "BENCH_WARMUP", 8*time.Second)
	window := envDur(t, "BENCH_WINDOW", 20*time.Second)
	sizes := []int{1000, 10000, 50000}
	if v := os.Getenv("BENCH_SIZES"); v != "" { // a quicker partial run: "10000" or "1000,10000"
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			var n int
			if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
				t.Fatalf("BENCH_SIZES=%q: want tag counts separated by commas", v)
			}
			sizes = append(sizes, n)
		}
	}
	sources := []string{"modbus", "sim"}
	if v := os.Getenv("BENCH_SOURCES"); v != "" {
		sources = strings.Split(v, ",")
	}
	var f, detail harness.Figures
	for _, src := range sources {
		res := map[int]result{}
		for _, n := range sizes {
			r := run(t, src, n, warm, window)
			res[n] = r
			k := fmt.Sprintf("%s_%dk_", src, n/1000)
			t.Logf("%s %d tags: ready %.0f ms (first %.0f), rss %.1f MiB (max %.1f, hwm %.1f, tree peak %.1f), cpu %.2f %% (tree %.2f %%, server %.2f %%), store +%.0f B in %.0f s",
				src, n, r.readyMS, r.firstReadyMS, r.rss, r.rssMax, r.hwm, r.tree, r.cpuPct, r.treeCPUPct, r.serverCPUPct, r.growthBytes, r.window)
			f.Set(k+"rss_mib", r.rss)
			f.Set(k+"hwm_mib", r.hwm)
			f.Set(k+"cpu_pct", r.cpuPct)
			f.Set(k+"db_mib_per_h", r.growthMiBh)
			f.Set(k+"ready_ms", r.readyMS)
			detail.Set(k+"first_ready_ms", r.firstReadyMS)
			detail.Set(k+"rss_max_mib", r.rssMax)
			detail.Set(k+"anon_mib", r.anon)
			detail.Set(k+"file_mib", r.file)
			detail.Set(k+"tree_peak_mib", r.tree)
			detail.Set(k+"tree_cpu_pct", r.treeCPUPct)
			if src == "modbus" {
				detail.Set(k+"server_cpu_pct", r.serverCPUPct)
			}
		}
		if len(res) != 3 || res[1000].rss == 0 || res[10000].rss == 0 || res[50000].rss == 0 {
			continue // a partial run: no slopes
		}
		// Bytes per tag: the slope of steady RSS between sizes; linear
		// when the two slopes agree.
		lo := (res[10000].rss - res[1000].rss) * (1 << 20) / 9000
		hi := (res[50000].rss - res[10000].rss) * (1 << 20) / 40000
		f.Set(src+"_rss_bytes_per_tag", (res[50000].rss-res[1000].rss)*(1<<20)/49000)
		detail.Set(src+"_bytes_per_tag_1k_10k", lo)
		detail.Set(src+"_bytes_per_tag_10k_50k", hi)
	}
	detail.Print("bench-footprint-detail")
	f.Print("bench-footprint")
}
