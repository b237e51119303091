//go:build bench

package alarmbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The workload (issue 16, Benchmark).
const (
	nTags      = 10000 // simulator tags, scanned every 1 s, each changing at every scan
	crossEvery = 10    // every 10th alarm crosses its setpoint (twice per sine period)
	warmup     = 15 * time.Second
	clkTck     = 100 // USER_HZ of /proc/<pid>/stat on Linux
)

func envInt(t *testing.T, k string, def int) int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number >= 1", k, v)
	}
	return n
}

func envDur(t *testing.T, k string, def time.Duration) time.Duration {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 5*time.Second {
		t.Fatalf("%s=%q: want a duration of 5s or more", k, v)
	}
	return d
}

// project is the benchmark's project: nTags sine tags with periods from 20
// to 60 s, and with alarms one above-setpoint alarm per tag (setpoint 90
// for every crossEvery-th tag, which the sine between 0 and 100 crosses;
// 150, never reached, for the others).
func project(alarms bool) string {
	var b strings.Builder
	b.WriteString("devices:\n  - {name: sim, driver: sim}\ntags:\n")
	for i := range nTags {
		fmt.Fprintf(&b, "  - {path: Bench/T%05d/Level, device: sim, address: \"sine(0,100,%ds)\", type: float64, scan: 1s, units: \"%%\"}\n",
			i, 20+i%41)
	}
	if alarms {
		b.WriteString("alarms:\n")
		for i := range nTags {
			sp := 150
			if i%crossEvery == 0 {
				sp = 90
			}
			fmt.Fprintf(&b, "  - {name: High, tag: Bench/T%05d/Level, mode: above, setpoint: %d, deadband: 2, priority: high}\n", i, sp)
		}
	}
	return b.String()
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// procCPU returns the CPU seconds (user + system) of pid itself.
func procCPU(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clkTck
}

// procMem returns pid's VmHWM (peak) and VmRSS in MiB.
func procMem(t *testing.T, pid int) (hwm, rss float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		kb, _ := strconv.ParseFloat(fs[0], 64)
		switch k {
		case "VmHWM":
			hwm = kb / 1024
		case "VmRSS":
			rss = kb / 1024
		}
	}
	return hwm, rss
}

// result is one run's figures.
type result struct {
	cpuPct      float64 // of one core, over the window
	hwmMiB      float64
	rssMiB      float64
	latencies   []float64 // ms, transition's source sample to its WebSocket message
	transitions int
	health      []string
}

type wsAlarm struct {
	Type     string `json:"type"`
	Event    string `json:"event"`
	Snapshot bool   `json:"snapshot"`
	Alarm    struct {
		ID        string     `json:"id"`
		Timestamp *time.Time `json:"timestamp"`
	} `json:"alarm"`
}

// runOnce runs qubiqd over the project (with or without alarms), lets it
// warm up, then measures over window.
func runOnce(t *testing.T, bin string, alarms bool, window time.Duration) result {
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf("appliance_id: bench-alarms\ndata_dir: data\nproject: project.yaml\nhttp: {listen: \"127.0.0.1:%d\"}\npython: {replicas: 1}\n", port)
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project(alarms)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(bin, "qubiqd"), "--config", filepath.Join(dir, "qubiq.yaml")}
	pin, set := os.LookupEnv("BENCH_PIN")
	if !set {
		pin = "0"
	}
	if tk, err := exec.LookPath("taskset"); err == nil && pin != "" {
		args = append([]string{tk, "-c", pin}, args...) // taskset execs qubiqd in place: the same pid
	}
	cmd := exec.Command(args[0], args[1:]...)
	logf, err := os.Create(filepath.Join(dir, "qubiqd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "qubiqd.log"))
			t.Fatalf("qubiqd did not answer within 90 s:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))

	pid := cmd.Process.Pid
	var mu sync.Mutex
	measuring := false
	var res result
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if alarms {
		ws, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/api/v1/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(1 << 20)
		if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe_alarms"}`)); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				_, b, err := ws.Read(ctx)
				now := time.Now()
				if err != nil {
					return
				}
				var m wsAlarm
				if json.Unmarshal(b, &m) != nil || m.Type != "alarm" || m.Snapshot || (m.Event != "activate" && m.Event != "clear") ||
					m.Alarm.Timestamp == nil {
					continue
				}
				mu.Lock()
				if measuring {
					res.latencies = append(res.latencies, float64(now.Sub(*m.Alarm.Timestamp).Microseconds())/1000)
					res.transitions++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(warmup)
	mu.Lock()
	measuring = true
	mu.Unlock()
	c0, t0 := procCPU(t, pid), time.Now()
	time.Sleep(window)
	c1, t1 := procCPU(t, pid), time.Now()
	mu.Lock()
	measuring = false
	mu.Unlock()
	res.cpuPct = 100 * (c1 - c0) / t1.Sub(t0).Seconds()
	res.hwmMiB, res.rssMiB = procMem(t, pid)
	var h struct {
		Reasons []string `json:"reasons"`
	}
	if resp, err := http.Get(base + "/api/v1/health"); err == nil {
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
	}
	res.health = h.Reasons
	return res
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// pct is the nearest-rank percentile p of xs.
func pct(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// TestBenchAlarms runs the benchmark and prints its line (bench/README.md).
func TestBenchAlarms(t *testing.T) {
	bin := os.Getenv("QUBIQ_BIN")
	if bin == "" {
		bin = "../../bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "qubiqd")); err != nil {
		t.Fatalf("no qubiqd in %s (make build): %v", bin, err)
	}
	runs := envInt(t, "BENCH_RUNS", 3)
	window := envDur(t, "BENCH_WINDOW", 30*time.Second)
	var fig = map[string][]float64{}
	add := func(k string, v float64) { fig[k] = append(fig[k], v) }
	for r := range runs {
		without := runOnce(t, bin, false, window)
		with := runOnce(t, bin, true, window)
		if with.transitions == 0 {
			t.Fatalf("run %d: no alarm transition reached the WebSocket in %s", r+1, window)
		}
		for _, h := range with.health {
			if strings.Contains(h, "alarm") {
				t.Errorf("run %d: health says %q", r+1, h)
			}
		}
		add("cpu_pct_without", without.cpuPct)
		add("cpu_pct_with", with.cpuPct)
		add("added_cpu_pct", with.cpuPct-without.cpuPct)
		add("rss_mib_without", without.hwmMiB)
		add("rss_mib_with", with.hwmMiB)
		add("added_rss_mib", with.hwmMiB-without.hwmMiB)
		add("added_vmrss_mib", with.rssMiB-without.rssMiB)
		add("latency_p50_ms", pct(with.latencies, 50))
		add("latency_p99_ms", pct(with.latencies, 99))
		add("latency_max_ms", pct(with.latencies, 100))
		add("transitions_per_s", float64(with.transitions)/window.Seconds())
		fmt.Fprintf(os.Stderr, "run %d: cpu_pct without=%.2f with=%.2f; rss_mib (VmHWM) without=%.1f with=%.1f; VmRSS without=%.1f with=%.1f; "+
			"transitions=%d latency p50=%.1fms p99=%.1fms max=%.1fms\n", r+1, without.cpuPct, with.cpuPct, without.hwmMiB, with.hwmMiB,
			without.rssMiB, with.rssMiB, with.transitions, pct(with.latencies, 50), pct(with.latencies, 99), pct(with.latencies, 100))
	}
	f := func(k string) string { return strconv.FormatFloat(median(fig[k]), 'f', 2, 64) }
	fmt.Fprintf(os.Stderr, "bench-alarms-detail: tags=%d crossing=%d window_s=%g runs=%d cpu_pct_without=%s cpu_pct_with=%s rss_mib_without=%s "+
		"rss_mib_with=%s added_vmrss_mib=%s transitions_per_s=%s latency_max_ms=%s\n", nTags, nTags/crossEvery, window.Seconds(), runs,
		f("cpu_pct_without"), f("cpu_pct_with"), f("rss_mib_without"), f("rss_mib_with"), f("added_vmrss_mib"), f("transitions_per_s"), f("latency_max_ms"))
	os.Stdout.WriteString(fmt.Sprintf("bench-alarms: defs=%d added_cpu_pct=%s added_rss_mib=%s latency_p50_ms=%s latency_p99_ms=%s\n",
		nTags, f("added_cpu_pct"), f("added_rss_mib"), f("latency_p50_ms"), f("latency_p99_ms")))
}
