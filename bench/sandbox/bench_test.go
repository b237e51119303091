//go:build bench

package sandboxbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/sandbox/rpc"
	"qubiq.dev/edge/value"
)

// The workload (issue 3, Benchmark).
const (
	read1Calls   = 20000
	read100Calls = 5000
	floorCalls   = 20000
	warmup       = 2000
	runsWindow   = 3 * time.Second
	respawns     = 5
)

// TestMain lets the test binary serve as the sandbox-exec helper, as
// cmd/qubiqd does.
func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper()
	os.Exit(m.Run())
}

func python() string {
	if p := os.Getenv("PYTHON_PATH"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// tagServices serves tag.read from a map of 100 tags through the
// TagReader fast path (as the daemon does) and records when each read
// arrives; anything else answers null.
type tagServices struct {
	tags  map[string]value.VQT
	mu    sync.Mutex
	stamp []int64 // arrival times of reads, ns since start
	start time.Time
	on    atomic.Bool
}

func newTagServices() *tagServices {
	s := &tagServices{tags: map[string]value.VQT{}, start: time.Now()}
	ts := time.Now().UTC()
	for i := range 100 {
		s.tags["Line1/Motor"+strconv.Itoa(i)+"/Speed"] = value.VQT{Value: 1500.25 + float64(i), Quality: value.Good, Time: ts}
	}
	return s
}

func (s *tagServices) Call(context.Context, auth.Grant, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage("null"), nil
}

func (s *tagServices) ReadTags(_ context.Context, _ auth.Grant, paths []string) ([]value.VQT, error) {
	if s.on.Load() {
		now := time.Since(s.start).Nanoseconds()
		s.mu.Lock()
		s.stamp = append(s.stamp, now)
		s.mu.Unlock()
	}
	out := make([]value.VQT, len(paths))
	for i, p := range paths {
		v, ok := s.tags[p]
		if !ok {
			v = value.Bad(value.BadNodeIDUnknown, "unknown tag", time.Now())
		}
		out[i] = v
	}
	return out, nil
}

// intervals returns the gaps between consecutive recorded arrivals, in µs,
// and clears the record.
func (s *tagServices) intervals() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]float64, 0, len(s.stamp))
	for i := 1; i < len(s.stamp); i++ {
		out = append(out, float64(s.stamp[i]-s.stamp[i-1])/1000)
	}
	s.stamp = s.stamp[:0]
	return out
}

const benchModule = `
@gateway(timeout_ms=600000)
def read(args):
    paths = ["Line1/Motor%d/Speed" % i for i in range(args["tags"])]
    read = system.tag.read
    for _ in range(args["n"]):
        read(paths)
    return args["n"]

def trivial(args):
    return args
`

var grant = auth.Grant{Principal: "bench", Realm: auth.RealmPlatform, Scopes: auth.AllScopes, WriteLevel: auth.LevelDesign}

func newPool(t *testing.T, svc sandbox.Services) (*sandbox.Pool, time.Duration) {
	t.Helper()
	cfg := sandbox.DefaultConfig()
	cfg.PythonPath = python()
	cfg.DataDir = t.TempDir()
	cfg.Replicas = 2
	cfg.GatewayTimeout.Max = 10 * time.Minute
	cfg.RecycleAfterRuns = 0
	p, err := sandbox.New(cfg, svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ready := time.Since(start)
	t.Cleanup(func() { p.Close(context.Background()) })
	if h := p.Health(); h.Python.Status != "ok" || h.Workers != 2 {
		t.Fatalf("pool not ready: %+v", h)
	}
	info, err := p.Check(context.Background(), "bench", benchModule)
	if err != nil {
		t.Fatal(err)
	}
	p.SetModule("bench", benchModule, info, 1)
	return p, ready
}

// readLatency runs n reads of tags tags in one script run and returns the
// round trips in µs.
func readLatency(t *testing.T, p *sandbox.Pool, svc *tagServices, tags, n int) []float64 {
	t.Helper()
	run := func(n int) {
		args := json.RawMessage(fmt.Sprintf(`{"tags":%d,"n":%d}`, tags, n))
		if _, err := p.Run(context.Background(), grant, "bench", "read", args); err != nil {
			t.Fatal(err)
		}
	}
	run(warmup)
	svc.intervals()
	svc.on.Store(true)
	run(n + 1)
	svc.on.Store(false)
	return svc.intervals()
}

// floorEcho is the floor over the same transport: a Python program writes
// an empty frame (a 4-byte zero length) to its fd 3, the Go side reads it
// as the worker reader does and writes an empty frame back on fd 4, and
// Python waits for it; Go records when each frame arrives.
const floorEcho = `
import os, sys
n = int(sys.argv[1])
hdr = b"\x00\x00\x00\x00"
for _ in range(n):
    os.write(3, hdr)
    os.read(4, 4)
`

func floorLatency(t *testing.T, n int) []float64 {
	t.Helper()
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python(), "-I", "-S", "-c", floorEcho, strconv.Itoa(n+warmup+1))
	cmd.ExtraFiles = []*os.File{fromW, toR}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fromW.Close()
	toR.Close()
	rd := rpc.NewReader(fromR)
	wr := rpc.NewWriter(toW)
	start := time.Now()
	stamps := make([]int64, 0, n+1)
	for i := 0; ; i++ {
		if _, err := rd.ReadFrame(); err != nil {
			if err == io.EOF {
				break
			}
			t.Fatal(err)
		}
		if i >= warmup {
			stamps = append(stamps, time.Since(start).Nanoseconds())
		}
		if err := wr.WriteFrame(nil); err != nil {
			break
		}
	}
	toW.Close()
	fromR.Close()
	cmd.Wait()
	out := make([]float64, 0, len(stamps))
	for i := 1; i < len(stamps); i++ {
		out = append(out, float64(stamps[i]-stamps[i-1])/1000)
	}
	return out
}

// runsPerSecond runs the trivial entry from 8 goroutines for runsWindow.
func runsPerSecond(t *testing.T, p *sandbox.Pool) float64 {
	t.Helper()
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), runsWindow)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := p.Run(context.Background(), grant, "bench", "trivial", json.RawMessage(`1`)); err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// respawnTime kills slot 0's worker with SIGKILL while idle and times
// until the slot has a live worker again.
func respawnTime(t *testing.T, p *sandbox.Pool) time.Duration {
	t.Helper()
	w := p.Workers()[0]
	if !w.Live || w.PID == 0 {
		t.Fatalf("slot 0 not live: %+v", w)
	}
	start := time.Now()
	if err := syscall.Kill(w.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for time.Since(start) < 30*time.Second {
		if x := p.Workers()[0]; x.Live && x.PID != w.PID && x.PID != 0 {
			return time.Since(start)
		}
		time.Sleep(200 * time.Microsecond)
	}
	t.Fatalf("slot 0 not respawned within 30s")
	return 0
}

// pct is the nearest-rank percentile of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func median(xs []float64) float64 { return pct(xs, 50) }

type result struct {
	read1P50, read1P99, read100P50, read100P99, floorP50, floorP99 float64
	runsPerS, poolReadyMs, respawnMs                               float64
}

func oneRun(t *testing.T) result {
	svc := newTagServices()
	var r result
	// Cold start: three pools, median.
	var readies []float64
	var p *sandbox.Pool
	for i := range 3 {
		pi, ready := newPool(t, svc)
		readies = append(readies, float64(ready.Microseconds())/1000)
		if i == 2 {
			p = pi
		} else {
			pi.Close(context.Background())
		}
	}
	r.poolReadyMs = median(readies)
	floor := floorLatency(t, floorCalls)
	r.floorP50, r.floorP99 = pct(floor, 50), pct(floor, 99)
	l1 := readLatency(t, p, svc, 1, read1Calls)
	r.read1P50, r.read1P99 = pct(l1, 50), pct(l1, 99)
	l100 := readLatency(t, p, svc, 100, read100Calls)
	r.read100P50, r.read100P99 = pct(l100, 50), pct(l100, 99)
	r.runsPerS = runsPerSecond(t, p)
	var rs []float64
	for range respawns {
		rs = append(rs, float64(respawnTime(t, p).Microseconds())/1000)
		time.Sleep(50 * time.Millisecond)
	}
	r.respawnMs = median(rs)
	h := p.Health()
	t.Logf("mode %s, hardening no_new_privs=%s netns=%s landlock=%s; %d read1 and %d read100 samples, %d floor samples",
		h.Mode, h.Hardening.NoNewPrivs, h.Hardening.NetNS, h.Hardening.Landlock, len(l1), len(l100), len(floor))
	return r
}

// TestBenchSandbox prints the bench-sandbox line (the median of
// BENCH_RUNS runs of every figure).
func TestBenchSandbox(t *testing.T) {
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	var all []result
	for i := range runs {
		r := oneRun(t)
		t.Logf("run %d: read1 p50 %.1f µs p99 %.1f µs; read100 p50 %.1f µs p99 %.1f µs; floor p50 %.1f µs p99 %.1f µs; "+
			"%.0f runs/s; pool ready %.1f ms; respawn %.1f ms", i+1, r.read1P50, r.read1P99, r.read100P50, r.read100P99,
			r.floorP50, r.floorP99, r.runsPerS, r.poolReadyMs, r.respawnMs)
		all = append(all, r)
	}
	m := func(f func(result) float64) float64 {
		xs := make([]float64, len(all))
		for i, r := range all {
			xs[i] = f(r)
		}
		return median(xs)
	}
	read1P50 := m(func(r result) float64 { return r.read1P50 })
	floorP50 := m(func(r result) float64 { return r.floorP50 })
	fmt.Printf("bench-sandbox: read1_p50_us=%.1f read1_p99_us=%.1f read100_p50_us=%.1f read100_p99_us=%.1f floor_p50_us=%.1f "+
		"floor_p99_us=%.1f floor_ratio=%.2f runs_per_s=%.0f pool_ready_ms=%.1f respawn_ms=%.1f\n",
		read1P50, m(func(r result) float64 { return r.read1P99 }), m(func(r result) float64 { return r.read100P50 }),
		m(func(r result) float64 { return r.read100P99 }), floorP50, m(func(r result) float64 { return r.floorP99 }),
		read1P50/floorP50, m(func(r result) float64 { return r.runsPerS }), m(func(r result) float64 { return r.poolReadyMs }),
		m(func(r result) float64 { return r.respawnMs }))
}
