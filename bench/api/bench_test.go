//go:build bench

package apibench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

// Workload sizes (issue 4, Benchmark), scaled by BENCH_SCALE (default 1).
var (
	incrEach     = 10000   // increments per worker
	trendTags    = 10      // tags of one day of 1 Hz history
	trendSeconds = 86400   // one day
	ingestTags   = 10000   // tags at 1 Hz
	steadySecs   = 10      // seconds of 10,000 tags at 1 Hz
	burstRate    = 100000  // samples/s of the burst
	burstSecs    = 5       // seconds of burst
	maxSamples   = 2000000 // samples of the unthrottled ingest (and of SQLite)
)

func scale(t *testing.T) {
	s := os.Getenv("BENCH_SCALE")
	if s == "" {
		return
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1 {
		t.Fatalf("BENCH_SCALE=%q: want a number in (0, 1]", s)
	}
	sc := func(n int) int { return max(1, int(float64(n)*f)) }
	incrEach, trendSeconds, steadySecs, burstSecs, maxSamples = sc(incrEach), sc(trendSeconds), sc(steadySecs), sc(burstSecs), sc(maxSamples)
}

// TestBenchAPI runs the benchmark and prints its line (bench/README.md).
func TestBenchAPI(t *testing.T) {
	scale(t)
	res := map[string]string{}
	benchIncrGo(t, res)
	benchIncrPython(t, res)
	benchTrends(t, res)
	benchIngest(t, res)
	benchSQLite(t, res)
	ours, _ := strconv.ParseFloat(res["ingest_samples_per_s"], 64)
	theirs, _ := strconv.ParseFloat(res["sqlite_samples_per_s"], 64)
	if theirs > 0 {
		res["sqlite_ratio"] = fmt.Sprintf("%.2f", ours/theirs)
	}
	keys := []string{"incr_lost", "incr_ops_per_s", "trends_raw_ms", "trends_avg_ms", "ingest_samples_per_s", "fsyncs_per_s", "sqlite_ratio"}
	var line []string
	for _, k := range keys {
		line = append(line, k+"="+res[k])
	}
	var extra []string
	for k, v := range res {
		if !slices.Contains(keys, k) {
			extra = append(extra, k+"="+v)
		}
	}
	slices.Sort(extra)
	fmt.Fprintln(os.Stderr, "bench-api details:", strings.Join(extra, " "))
	os.Stdout.WriteString("bench-api: " + strings.Join(append(line, extra...), " ") + "\n")
}

func openStore(t *testing.T, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, store.FileName), store.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// benchIncrGo: store.Vars.Incr from two goroutines (the store alone).
func benchIncrGo(t *testing.T, res map[string]string) {
	db := openStore(t, t.TempDir())
	v := store.NewVars(db)
	defer v.Close(context.Background())
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range incrEach {
				if _, err := v.Incr(context.Background(), "c", "1"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	got, _, _ := v.Get("c")
	n, _ := strconv.Atoi(string(got))
	res["incr_go_lost"] = strconv.Itoa(2*incrEach - n)
	res["incr_go_ops_per_s"] = fmt.Sprintf("%.0f", float64(2*incrEach)/el.Seconds())
}

// benchIncrPython: system.vars.incr from two Python workers of a real
// qubiqd (python.replicas 2), each incrEach times, run in parallel over
// REST.
func benchIncrPython(t *testing.T, res map[string]string) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "qubiqd")
	if out, err := exec.Command("go", "build", "-o", bin, "qubiq.dev/edge/cmd/qubiqd").CombinedOutput(); err != nil {
		t.Fatalf("build qubiqd: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	py := os.Getenv("PYTHON_PATH")
	if py == "" {
		if py, err = filepath.EvalSymlinks("/usr/bin/python3"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf("appliance_id: bench\ndata_dir: data\nhttp: {listen: %q}\npython: {path: %q, replicas: 2, gateway_timeout: {default: 10m, min: 10ms, max: 10m}}\n", addr, py)
	os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644)
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "qubiq.yaml"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	url := "http://" + addr + "/api/v1"
	var token string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap-token")); err == nil {
			if resp, err := http.Get(url + "/health"); err == nil {
				resp.Body.Close()
				token = strings.TrimSpace(string(b))
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("qubiqd did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	call := func(method, path string, body any) []byte {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out
	}
	code := "@gateway(timeout_ms=600000)\ndef incr(args):\n    for i in range(args):\n        system.vars.incr(\"c\")\n    return 0\n"
	call("PUT", "/scripts/bench", map[string]any{"code": code})
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call("POST", "/scripts/bench/incr/run", map[string]any{"args": incrEach})
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var v struct {
		Value json.Number `json:"value"`
	}
	json.Unmarshal(call("GET", "/vars/c", nil), &v)
	n, _ := strconv.Atoi(v.Value.String())
	res["incr_lost"] = strconv.Itoa(2*incrEach - n)
	res["incr_ops_per_s"] = fmt.Sprintf("%.0f", float64(2*incrEach)/el.Seconds())
}

// benchTrends: one day of 1 Hz history for 10 tags, queried raw and as
// 1-minute time-weighted averages (median of 3 queries each).
func benchTrends(t *testing.T, res map[string]string) {
	db := openStore(t, t.TempDir())
	h, err := store.OpenHistory(db, store.HistoryOptions{Queue: 1 << 20, CommitEvery: time.Hour, CheckpointSamples: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	day := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	paths := make([]string, trendTags)
	for i := range paths {
		paths[i] = fmt.Sprintf("Line1/Tag%02d", i)
	}
	for s := 0; s < trendSeconds; s++ {
		for i, p := range paths {
			for !h.Record(p, store.Sample{Time: day.Add(time.Duration(s) * time.Second), Value: float64(s%600) + float64(i), Quality: value.Good}) {
				if err := h.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := h.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	end := day.Add(time.Duration(trendSeconds-1) * time.Second)
	median := func(q store.TrendQuery, wantPoints int) float64 {
		var ds []float64
		for range 3 {
			start := time.Now()
			trs, err := h.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, float64(time.Since(start).Microseconds())/1000)
			n := 0
			for _, tr := range trs {
				n += len(tr.Points)
			}
			if n != wantPoints {
				t.Fatalf("query %s gave %d points; want %d", q.Aggregate, n, wantPoints)
			}
		}
		slices.Sort(ds)
		return ds[1]
	}
	res["trends_raw_ms"] = fmt.Sprintf("%.1f", median(store.TrendQuery{Paths: paths, Start: day, End: end}, trendTags*trendSeconds))
	res["trends_raw_1tag_ms"] = fmt.Sprintf("%.1f", median(store.TrendQuery{Paths: paths[:1], Start: day, End: end}, trendSeconds))
	res["trends_avg_ms"] = fmt.Sprintf("%.1f", median(store.TrendQuery{Paths: paths, Start: day, End: end, Interval: time.Minute,
		Aggregate: store.AggAvg}, trendTags*((trendSeconds+59)/60)))
	res["trends_points"] = strconv.Itoa(trendTags * trendSeconds)
}

// benchIngest: the recorder with its default options: 10,000 tags at 1 Hz
// (fsyncs/s), a 100,000 samples/s burst (drops), then as fast as it takes
// (samples/s, bytes per sample on disk).
func benchIngest(t *testing.T, res map[string]string) {
	dir := t.TempDir()
	db := openStore(t, dir)
	h, err := store.OpenHistory(db, store.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	paths := make([]string, ingestTags)
	for i := range paths {
		paths[i] = fmt.Sprintf("Area%02d/Line%02d/Tag%04d", i/1000, i/100%10, i)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	seq := 0
	sample := func() (string, store.Sample) {
		i := seq
		seq++
		return paths[i%ingestTags], store.Sample{Time: base.Add(time.Duration(i/ingestTags) * time.Second), Value: float64(i%1000) * 0.5, Quality: value.Good}
	}
	// Steady: 10,000 samples each second.
	st0 := h.Stats()
	start := time.Now()
	tick := time.NewTicker(time.Second)
	for s := 0; s < steadySecs; s++ {
		for range ingestTags {
			p, smp := sample()
			h.Record(p, smp)
		}
		<-tick.C
	}
	tick.Stop()
	el := time.Since(start)
	st1 := h.Stats()
	fs := 2 * float64((st1.Commits-st0.Commits)+(st1.Checkpoints-st0.Checkpoints)) / el.Seconds()
	res["steady_fsyncs_per_s"] = fmt.Sprintf("%.1f", fs)
	res["steady_dropped"] = strconv.FormatUint(st1.Dropped-st0.Dropped, 10)
	// Burst: burstRate samples/s for burstSecs, in 10 ms slices.
	slice := burstRate / 100
	start = time.Now()
	next := start
	for i := 0; i < burstSecs*100; i++ {
		for range slice {
			p, smp := sample()
			h.Record(p, smp)
		}
		next = next.Add(10 * time.Millisecond)
		time.Sleep(time.Until(next))
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st2 := h.Stats()
	bel := time.Since(start)
	res["burst_dropped"] = strconv.FormatUint(st2.Dropped-st1.Dropped, 10)
	res["burst_fsyncs_per_s"] = fmt.Sprintf("%.1f", 2*float64((st2.Commits-st1.Commits)+(st2.Checkpoints-st1.Checkpoints))/bel.Seconds())
	res["fsyncs_per_s"] = fmt.Sprintf("%.1f", 2*float64((st2.Commits-st0.Commits)+(st2.Checkpoints-st0.Checkpoints))/(el+bel).Seconds())
	// Unthrottled: as fast as the queue takes them, until committed.
	st3 := st2
	start = time.Now()
	n := maxSamples
	for i := 0; i < n; i++ {
		p, smp := sample()
		for !h.Record(p, smp) {
			time.Sleep(time.Millisecond)
		}
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	el = time.Since(start)
	st4 := h.Stats()
	if st4.Committed-st3.Committed != uint64(n) {
		t.Fatalf("committed %d of %d", st4.Committed-st3.Committed, n)
	}
	res["ingest_queue_full_retries"] = strconv.FormatUint(st4.Dropped-st3.Dropped, 10)
	res["ingest_samples_per_s"] = fmt.Sprintf("%.0f", float64(n)/el.Seconds())
	res["ingest_fsyncs_per_s"] = fmt.Sprintf("%.1f", 2*float64((st4.Commits-st3.Commits)+(st4.Checkpoints-st3.Checkpoints))/el.Seconds())
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	total := st4.Committed
	res["bytes_per_sample"] = fmt.Sprintf("%.1f", float64(fi.Size())/float64(total))
	res["block_bytes_per_sample"] = fmt.Sprintf("%.1f", float64(h.Stats().Bytes)/float64(total))
}

// sqliteScript writes the unthrottled ingest's samples (same count, same
// tags, same time steps) into SQLite in WAL mode with executemany in
// 1,000-row transactions, and prints the samples per second and the file
// size (bench/README.md, B9: the Ignition-Edge-like stand-in).
const sqliteScript = `
import sqlite3, sys, time, os
path, n, tags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE samples (tag_id INTEGER NOT NULL, t INTEGER NOT NULL, v REAL, q INTEGER NOT NULL)")
db.execute("CREATE INDEX samples_tag_t ON samples (tag_id, t)")
base = int(time.time() - 3600) * 1000000000
start = time.perf_counter()
i = 0
while i < n:
    rows = [(j % tags, base + (j // tags) * 1000000000, (j % 1000) * 0.5, 1) for j in range(i, min(i + 1000, n))]
    db.execute("BEGIN")
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?)", rows)
    db.execute("COMMIT")
    i += 1000
el = time.perf_counter() - start
db.close()
size = os.path.getsize(path) + (os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0)
print("%.0f %d" % (n / el, size))
`

func benchSQLite(t *testing.T, res map[string]string) {
	path := filepath.Join(t.TempDir(), "samples.sqlite")
	out, err := exec.Command("/usr/bin/python3", "-c", sqliteScript, path, strconv.Itoa(maxSamples), strconv.Itoa(ingestTags)).CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 peer: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("sqlite3 peer printed %q", out)
	}
	res["sqlite_samples_per_s"] = f[0]
	size, _ := strconv.ParseFloat(f[1], 64)
	res["sqlite_bytes_per_sample"] = fmt.Sprintf("%.1f", size/float64(maxSamples))
}
