//go:build bench

package modbusbench

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gbmodbus "github.com/goburrow/modbus"

	"qubiq.dev/edge/device/modbus"
	"qubiq.dev/edge/internal/peers"
)

// The workload (issue 5, Benchmark).
const (
	nTags     = 2000
	nRegs     = 10000
	seed      = 5
	period    = time.Second
	floorRuns = 30
)

// nScans is the number of scans (and of Node-RED's periods) measured: 30,
// or BENCH_SCANS for a quicker smoke run.
var nScans = 30

// TestBenchModbus runs the benchmark BENCH_RUNS times (default 1; run.sh
// asks for 3, bench/README.md's harness rule) and prints the median of each
// figure on its last line. See bench/README.md.
func TestBenchModbus(t *testing.T) {
	runs := 1
	if s := os.Getenv("BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("BENCH_RUNS=%q: want a positive integer", s)
		}
		runs = n
	}
	if s := os.Getenv("BENCH_SCANS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("BENCH_SCANS=%q: want a positive integer", s)
		}
		nScans = n
	}
	noderedDir := os.Getenv("QUBIQ_BENCH_NODERED")
	if noderedDir == "" {
		t.Fatal("QUBIQ_BENCH_NODERED must name the directory where run.sh installed node-red 4.1.8 and node-red-contrib-modbus 5.23.3")
	}
	l, err := Generate(seed, nTags, nRegs)
	if err != nil {
		t.Fatal(err)
	}
	minReqs := MinRequests(l.Tags, modbus.DefaultConfig.MaxGap, modbus.DefaultConfig.MaxRegistersPerRequest)
	dir := t.TempDir()
	scanner := filepath.Join(dir, "scanner")
	if out, err := exec.Command("go", "build", "-o", scanner, "./cmd/scanner").CombinedOutput(); err != nil {
		t.Fatalf("build the scanner: %v\n%s", err, out)
	}
	srv := startPymodbus(t, dir, l)
	var all []map[string]float64
	for run := 1; run <= runs; run++ {
		fig := map[string]float64{"min_requests_per_scan": float64(len(minReqs))}
		proxy := newCountingProxy(t, srv.addr)
		layout := writeLayout(t, dir, proxy, l, minReqs)
		ours(t, scanner, layout, proxy, srv, fig)
		daemon(t, l, proxy, srv, fig)
		nodered(t, dir, noderedDir, proxy, srv, minReqs, fig)
		floor(t, scanner, layout, proxy, srv, fig)
		floorBackToBack(t, proxy, minReqs, fig)
		fig["floor_ratio"] = fig["driver_scan_p50_ms"] / fig["floor_scan_ms"]
		fig["cpu_ratio"] = fig["cpu_s"] / fig["nodered_cpu_s"]
		fig["rss_ratio"] = fig["rss_mib"] / fig["nodered_rss_mib"]
		t.Logf("run %d: %s", run, line(fig, detailKeys))
		all = append(all, fig)
	}
	med := map[string]float64{}
	for k := range all[0] {
		var vs []float64
		for _, f := range all {
			vs = append(vs, f[k])
		}
		slices.Sort(vs)
		med[k] = vs[len(vs)/2]
	}
	// Written to stdout, not t.Log, so that run.sh can end with it.
	os.Stdout.WriteString("bench-modbus-detail: " + line(med, detailKeys) + "\n")
	os.Stdout.WriteString("bench-modbus: " + line(med, mainKeys) + "\n")
}

var mainKeys = []string{"requests_per_scan", "min_requests_per_scan", "cpu_s", "rss_mib", "nodered_cpu_s", "nodered_rss_mib",
	"cpu_ratio", "rss_ratio", "driver_scan_p50_ms", "driver_scan_p99_ms", "driver_cpu_s", "driver_rss_mib", "floor_scan_ms", "floor_ratio"}

var detailKeys = []string{"daemon_cpu_s", "tree_rss_mib", "ready_ms", "driver_requests_per_scan", "nodered_requests_per_scan",
	"bad_points", "driver_scan_max_ms", "floor_p99_ms", "floor_b2b_ms", "floor_cpu_s", "floor_rss_mib",
	"pymodbus_cpu_s_daemon", "pymodbus_cpu_s_driver", "pymodbus_cpu_s_nodered"}

func line(fig map[string]float64, keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		v := fig[k]
		switch {
		case strings.HasSuffix(k, "requests_per_scan") && k != "min_requests_per_scan" || strings.HasSuffix(k, "ratio"):
			fmt.Fprintf(&b, "%s=%.3g", k, v)
		case k == "min_requests_per_scan" || k == "bad_points":
			fmt.Fprintf(&b, "%s=%d", k, int(v))
		default:
			fmt.Fprintf(&b, "%s=%.2f", k, v)
		}
	}
	return b.String()
}

// server is the pymodbus process serving the layout's registers.
type server struct {
	addr string
	pid  int
}

// startPymodbus runs internal/peers/modbus_server.py (Debian
// python3-pymodbus) with every register of the layout, pinned to core 1
// (bench/README.md, harness rules: the simulator on core 1, the system
// under test on core 0).
func startPymodbus(t *testing.T, dir string, l Layout) server {
	t.Helper()
	port := peers.FreePort(t)
	hr := map[string]uint16{}
	for a, v := range l.Values {
		hr[strconv.Itoa(a)] = v
	}
	cfg, _ := json.Marshal(map[string]any{"port": port, "units": map[string]any{"1": map[string]any{"hr": hr, "size": nRegs}}})
	path := filepath.Join(dir, "pymodbus.json")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("taskset", "-c", "1", peers.Python, "../../internal/peers/modbus_server.py", path)
	stdout, _ := cmd.StdoutPipe()
	logf, err := os.Create(filepath.Join(dir, "pymodbus.log")) // it logs every closed connection as an error
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pymodbus: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("pymodbus exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pymodbus not ready in 30 s")
	}
	return server{addr: fmt.Sprintf("127.0.0.1:%d", port), pid: cmd.Process.Pid}
}

// countingProxy forwards Modbus TCP between clients and the server and
// counts the request frames.
type countingProxy struct {
	ln       net.Listener
	requests atomic.Int64
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(c, s); c.Close() }()
			go func() { p.pump(c, s); s.Close() }()
		}
	}()
	return p
}

func (p *countingProxy) pump(c, s net.Conn) {
	r := bufio.NewReader(c)
	for {
		var hdr [7]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		frame := make([]byte, 6+int(binary.BigEndian.Uint16(hdr[4:])))
		copy(frame, hdr[:])
		if _, err := io.ReadFull(r, frame[7:]); err != nil {
			return
		}
		p.requests.Add(1)
		if _, err := s.Write(frame); err != nil {
			return
		}
	}
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

// procCPU returns the user+system CPU seconds of pid (/proc/pid/stat).
func procCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64) // field 14 of stat(5)
	st, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (ut + st) / 100                 // USER_HZ is 100 on Linux
}

// procHWM returns the peak RSS of pid in MiB (VmHWM of /proc/pid/status).
func procHWM(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if f := strings.Fields(ln); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatalf("no VmHWM for pid %d", pid)
	return 0
}

func percentile(ms []float64, p float64) float64 {
	s := slices.Clone(ms)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}

// writeLayout writes the scanner's input: the points, the minimal
// requests (for -floor), the driver settings, the period and the number of
// scans.
func writeLayout(t *testing.T, dir string, proxy *countingProxy, l Layout, reqs []Request) string {
	t.Helper()
	type request struct{ Start, Count int }
	type layoutFile struct {
		URL                    string    `json:"url"`
		Timeout                string    `json:"timeout"`
		MaxGap                 int       `json:"max_gap"`
		MaxRegistersPerRequest int       `json:"max_registers_per_request"`
		Period                 string    `json:"period"`
		Scans                  int       `json:"scans"`
		Points                 any       `json:"points"`
		Requests               []request `json:"requests"`
	}
	var points []any
	for _, tg := range l.Tags {
		points = append(points, tg.Point)
	}
	var rs []request
	for _, r := range reqs {
		rs = append(rs, request{r.Start, r.Count})
	}
	b, _ := json.Marshal(layoutFile{URL: "tcp://" + proxy.addr(), Timeout: "1s", MaxGap: modbus.DefaultConfig.MaxGap,
		MaxRegistersPerRequest: modbus.DefaultConfig.MaxRegistersPerRequest, Period: period.String(), Scans: nScans,
		Points: points, Requests: rs})
	path := filepath.Join(dir, "layout.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// measured is what one scanner run gave: scan durations (ms), bad points,
// the scanner's CPU seconds and peak RSS, requests on the wire and the
// server's CPU seconds over the measured scans.
type measured struct {
	scans     []float64
	bad       int
	cpu, rss  float64
	requests  int64
	serverCPU float64
}

// runScanner runs the scanner binary (args before the layout) pinned to
// core 0 and measures it from its go line to its done line.
func runScanner(t *testing.T, scanner string, args []string, layout string, proxy *countingProxy, srv server) measured {
	t.Helper()
	cmd := exec.Command("taskset", append(append([]string{"-c", "0", scanner}, args...), layout)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the scanner: %v", err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	dec := json.NewDecoder(stdout)
	type message struct {
		Ready, Done bool
		ScanNS      int64 `json:"scan_ns"`
		Bad         int
	}
	var msg message
	if err := dec.Decode(&msg); err != nil || !msg.Ready {
		t.Fatalf("scanner %v not ready: %v", args, err)
	}
	pid := cmd.Process.Pid
	cpu0, req0, py0 := procCPU(t, pid), proxy.requests.Load(), procCPU(t, srv.pid)
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var m measured
	for {
		msg = message{}
		if err := dec.Decode(&msg); err != nil {
			t.Fatalf("scanner %v: %v", args, err)
		}
		if msg.Done {
			break
		}
		m.scans = append(m.scans, float64(msg.ScanNS)/1e6)
		m.bad += msg.Bad
	}
	m.cpu, m.rss = procCPU(t, pid)-cpu0, procHWM(t, pid)
	m.requests, m.serverCPU = proxy.requests.Load()-req0, procCPU(t, srv.pid)-py0
	return m
}

// ours runs the scanner (the modbus driver) over nScans scans at period.
func ours(t *testing.T, scanner, layout string, proxy *countingProxy, srv server, fig map[string]float64) {
	t.Helper()
	m := runScanner(t, scanner, nil, layout, proxy, srv)
	fig["driver_cpu_s"] = m.cpu
	fig["driver_rss_mib"] = m.rss
	fig["pymodbus_cpu_s_driver"] = m.serverCPU
	fig["driver_requests_per_scan"] = float64(m.requests) / float64(len(m.scans))
	fig["driver_scan_p50_ms"] = percentile(m.scans, 0.50)
	fig["driver_scan_p99_ms"] = percentile(m.scans, 0.99)
	fig["driver_scan_max_ms"] = percentile(m.scans, 1)
	fig["bad_points"] = float64(m.bad)
	if m.bad > 0 {
		t.Errorf("%d bad points over %d scans", m.bad, len(m.scans))
	}
}

// floor runs the scanner with -floor: a bare goburrow client sending the
// minimal requests back to back each period, in the same conditions as
// ours (process, core, proxy, period).
func floor(t *testing.T, scanner, layout string, proxy *countingProxy, srv server, fig map[string]float64) {
	t.Helper()
	m := runScanner(t, scanner, []string{"-floor"}, layout, proxy, srv)
	if m.bad > 0 {
		t.Errorf("floor: %d failed requests", m.bad)
	}
	fig["floor_scan_ms"] = percentile(m.scans, 0.50)
	fig["floor_p99_ms"] = percentile(m.scans, 0.99)
	fig["floor_cpu_s"] = m.cpu
	fig["floor_rss_mib"] = m.rss
}

// nodered runs Node-RED with one modbus-read node per request of the
// minimal plan (its best configuration: it does not merge requests
// itself), each polling every period, on core 0, and measures it over
// nScans periods after it has warmed up.
func nodered(t *testing.T, dir, install string, proxy *countingProxy, srv server, reqs []Request, fig map[string]float64) {
	t.Helper()
	red := filepath.Join(install, "node_modules", "node-red", "red.js")
	if _, err := os.Stat(red); err != nil {
		t.Fatalf("Node-RED is not installed in %s (run.sh installs it): %v", install, err)
	}
	user := filepath.Join(dir, "nodered")
	if err := os.MkdirAll(user, 0o755); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(proxy.addr())
	flows := []map[string]any{
		{"id": "bench_tab", "type": "tab", "label": "bench"},
		{"id": "bench_client", "type": "modbus-client", "name": "pymodbus via proxy", "clienttype": "tcp",
			"bufferCommands": true, "stateLogEnabled": false, "queueLogEnabled": false, "failureLogEnabled": false,
			"tcpHost": host, "tcpPort": port, "tcpType": "DEFAULT", "serialPort": "/dev/ttyUSB", "serialType": "RTU-BUFFERD",
			"serialBaudrate": "9600", "serialDatabits": "8", "serialStopbits": "1", "serialParity": "none",
			"serialConnectionDelay": "100", "serialAsciiResponseStartDelimiter": "0x3A", "unit_id": "1",
			"commandDelay": "1", "clientTimeout": "1000", "reconnectOnTimeout": true, "reconnectTimeout": "2000",
			"parallelUnitIdsAllowed": true},
		{"id": "bench_count", "type": "function", "z": "bench_tab", "name": "count", "outputs": 1, "wires": [][]string{{}},
			"func": "context.n = (context.n || 0) + 1;\nreturn null;"},
	}
	for i, r := range reqs {
		flows = append(flows, map[string]any{"id": fmt.Sprintf("bench_read_%d", i), "type": "modbus-read", "z": "bench_tab",
			"name": fmt.Sprintf("block %d", i), "topic": "", "showStatusActivities": false, "logIOActivities": false,
			"showErrors": false, "unitid": "1", "dataType": "HoldingRegister", "adr": strconv.Itoa(r.Start),
			"quantity": strconv.Itoa(r.Count), "rate": "1", "rateUnit": "s", "delayOnStart": false, "startDelayTime": "",
			"server": "bench_client", "useIOFile": false, "ioFile": "", "useIOForPayload": false, "emptyMsgOnFail": false,
			"x": 200, "y": 40 * (i + 1), "wires": [][]string{{"bench_count"}, {}}})
	}
	fb, _ := json.MarshalIndent(flows, "", " ")
	if err := os.WriteFile(filepath.Join(user, "flows.json"), fb, 0o644); err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf(`module.exports = {
  uiHost: "127.0.0.1", uiPort: %d, disableEditor: true, httpAdminRoot: false, httpNodeRoot: false,
  credentialSecret: false, flowFile: "flows.json",
  logging: { console: { level: "warn", metrics: false, audit: false } }
};
`, peers.FreePort(t))
	if err := os.WriteFile(filepath.Join(user, "settings.js"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("taskset", "-c", "0", "node", red, "-u", user, "-s", filepath.Join(user, "settings.js"), "flows.json")
	cmd.Dir = install
	logf, _ := os.Create(filepath.Join(dir, "nodered.log"))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Node-RED: %v", err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	// Warm-up: Node-RED polls every block at least twice, then 2 s more.
	start := proxy.requests.Load()
	deadline := time.Now().Add(60 * time.Second)
	for proxy.requests.Load()-start < int64(2*len(reqs)) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "nodered.log"))
			t.Fatalf("Node-RED sent %d requests in 60 s, want %d; its log:\n%s", proxy.requests.Load()-start, 2*len(reqs), log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	pid := cmd.Process.Pid
	cpu0, req0, py0 := procCPU(t, pid), proxy.requests.Load(), procCPU(t, srv.pid)
	time.Sleep(time.Duration(nScans) * period)
	fig["nodered_cpu_s"] = procCPU(t, pid) - cpu0
	fig["nodered_rss_mib"] = procHWM(t, pid)
	fig["pymodbus_cpu_s_nodered"] = procCPU(t, srv.pid) - py0
	fig["nodered_requests_per_scan"] = float64(proxy.requests.Load()-req0) / float64(nScans)
}

// floorBackToBack sends the minimal requests with goburrow's own TCP
// client in the benchmark's process, floorRuns scans back to back with no
// pause: the server-bound limit with every cache warm (a detail figure).
func floorBackToBack(t *testing.T, proxy *countingProxy, reqs []Request, fig map[string]float64) {
	t.Helper()
	h := gbmodbus.NewTCPClientHandler(proxy.addr())
	h.SlaveId, h.Timeout = 1, time.Second
	if err := h.Connect(); err != nil {
		t.Fatalf("floor: connect: %v", err)
	}
	defer h.Close()
	c := gbmodbus.NewClient(h)
	var scans []float64
	for range floorRuns + 1 {
		start := time.Now()
		for _, r := range reqs {
			if _, err := c.ReadHoldingRegisters(uint16(r.Start), uint16(r.Count)); err != nil {
				t.Fatalf("floor: read %d+%d: %v", r.Start, r.Count, err)
			}
		}
		scans = append(scans, float64(time.Since(start).Nanoseconds())/1e6)
	}
	fig["floor_b2b_ms"] = percentile(scans[1:], 0.50) // the first one warms the connection up
}
