//go:build bench

package flowsbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
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

	"qubiq.dev/edge/internal/peers"
)

// The workload (doc.go), scaled by BENCH_MSGS and BENCH_RUNS.
var (
	burstN = 20000                 // messages of the throughput burst
	e2eN   = 200                   // triggers of the latency run
	e2eGap = 20 * time.Millisecond // between them
	warmN  = 10                    // triggers before the latency run
)

// TestBenchFlows runs qubiqd, then Node-RED, BENCH_RUNS times (default 3),
// and prints the medians (bench/README.md, bench-flows).
func TestBenchFlows(t *testing.T) {
	if s := os.Getenv("BENCH_MSGS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			t.Fatalf("BENCH_MSGS=%q: want a number of at least 100", s)
		}
		burstN = n
	}
	runs := 3
	if s := os.Getenv("BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("BENCH_RUNS=%q", s)
		}
		runs = n
	}
	bin := os.Getenv("QUBIQ_BIN")
	if bin == "" {
		t.Fatal("QUBIQ_BIN must name the directory holding the built qubiqd (run.sh sets it)")
	}
	red := os.Getenv("QUBIQ_BENCH_NODERED")
	if red == "" {
		t.Fatal("QUBIQ_BENCH_NODERED must name the directory where run.sh installed node-red 4.1.8 and node-red-contrib-modbus 5.23.3")
	}
	srv := startStamp(t)
	all := map[string][]float64{}
	for r := 1; r <= runs; r++ {
		fig := map[string]float64{}
		benchOurs(t, filepath.Join(bin, "qubiqd"), srv, fig)
		benchNodeRED(t, red, srv, fig)
		var parts []string
		for _, k := range sortedKeys(fig) {
			all[k] = append(all[k], fig[k])
			parts = append(parts, fmt.Sprintf("%s=%s", k, num(fig[k])))
		}
		fmt.Fprintf(os.Stderr, "run %d: %s\n", r, strings.Join(parts, " "))
	}
	med := map[string]float64{}
	for k, v := range all {
		slices.Sort(v)
		med[k] = v[len(v)/2]
	}
	// Per core used: what each gets through one core's worth of CPU.
	ours := med["msgs_per_s"] / math.Max(med["cores"], 0.01)
	theirs := med["nodered_msgs_per_s"] / math.Max(med["nodered_cores"], 0.01)
	med["throughput_ratio"] = ours / theirs
	med["e2e_ratio"] = med["e2e_p50_ms"] / med["nodered_e2e_p50_ms"]
	keys := []string{"msgs_per_s", "nodered_msgs_per_s", "throughput_ratio", "e2e_p50_ms", "e2e_p99_ms", "nodered_e2e_p50_ms", "e2e_ratio"}
	var detail, line []string
	for _, k := range sortedKeys(med) {
		if !slices.Contains(keys, k) {
			detail = append(detail, k+"="+num(med[k]))
		}
	}
	for _, k := range keys {
		line = append(line, k+"="+num(med[k]))
	}
	os.Stdout.WriteString("bench-flows-detail: " + strings.Join(detail, " ") + "\n")
	os.Stdout.WriteString("bench-flows: " + strings.Join(line, " ") + "\n")
}

func num(f float64) string {
	switch {
	case f >= 1000:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.3f", f)
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// --- the stamping pymodbus server ---

type stamp struct {
	port int
	mu   sync.Mutex
	seen map[int]time.Time // value written to HR0 → when it arrived (the latest)
}

func startStamp(t *testing.T) *stamp {
	t.Helper()
	s := &stamp{port: peers.FreePort(t), seen: map[int]time.Time{}}
	script, err := filepath.Abs("stamp_server.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("taskset", "-c", "1", peers.Python, script, strconv.Itoa(s.port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pymodbus: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 2 && f[0] == "READY":
				once.Do(func() { close(ready) })
			case len(f) >= 4 && f[0] == "WRITE" && f[2] == "0":
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				v, _ := strconv.Atoi(f[3])
				s.mu.Lock()
				s.seen[v] = time.Unix(0, ns)
				s.mu.Unlock()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("pymodbus did not start within 20 s (python3-pymodbus installed?)")
	}
	return s
}

// wait returns when value v arrived at HR0 (after since), or false after
// timeout. The time is pymodbus's own stamp, so how often this polls does
// not change the figure.
func (s *stamp) wait(v int, since time.Time, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		at, ok := s.seen[v]
		s.mu.Unlock()
		if ok && !at.Before(since.Add(-time.Millisecond)) {
			return at, true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *stamp) forget() {
	s.mu.Lock()
	s.seen = map[int]time.Time{}
	s.mu.Unlock()
}

// --- process figures ---

// cpuTree returns the CPU seconds (user + system) of pid and every process
// descending from it (the Python workers of qubiqd).
func cpuTree(pid int) float64 {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	cpu := map[int]float64{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		pp, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		parent[p], cpu[p] = pp, (ut+st)/100
	}
	total := 0.0
	for p, c := range cpu {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				total += c
				break
			}
		}
	}
	return total
}

func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func post(t *testing.T, url, token string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func get(t *testing.T, url, token string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// --- qubiqd ---

const ourNode = "def transform(msg):\n    msg['payload'] = msg['value'] * 0.1 + 3\n    return msg\n"
const ourE2ENode = "def transform(msg):\n    msg['payload'] = round(msg['value'] * 0.1 + 3)\n    return msg\n"

func benchOurs(t *testing.T, qubiqd string, srv *stamp, fig map[string]float64) {
	dir := t.TempDir()
	port := peers.FreePort(t)
	cfg := fmt.Sprintf("data_dir: data\nproject: project.yaml\nhttp: {listen: \"127.0.0.1:%d\"}\npython: {replicas: 2}\n", port)
	project := fmt.Sprintf(`devices:
  - {name: sim, driver: sim}
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 1s}
tags:
  - {path: Bench/Burst, device: sim, address: memory, type: int64}
  - {path: Bench/In, device: sim, address: memory, type: int64}
  - {path: Bench/Out, device: plc1, address: HR0, type: uint16, scan: 1h}
scripts:
  - {module: burst, file: burst.py}
flows:
  - name: throughput
    trigger: {tag: Bench/Burst}
    queue: 100000
    nodes:
      - {id: f, type: python, code: %q}
  - name: e2e
    trigger: {tag: Bench/In}
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - {id: f, type: python, next: w, code: %q}
      - {id: w, type: tag_write, path: Bench/Out}
`, srv.port, ourNode, ourE2ENode)
	burst := `
@gateway(timeout_ms=600000)
def burst(args):
    n = args["n"]
    for start in range(0, n, 1000):
        vals = list(range(start + 1, min(start + 1000, n) + 1))
        system.tag.write(["Bench/Burst"] * len(vals), vals)
    return n
`
	for name, body := range map[string]string{"qubiq.yaml": cfg, "project.yaml": project, "burst.py": burst} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	py, err := filepath.EvalSymlinks(peers.Python)
	if err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("PYTHON_PATH"); p != "" {
		py = p
	}
	cmd := exec.Command("taskset", "-c", "0", qubiqd, "--config", filepath.Join(dir, "qubiq.yaml"))
	cmd.Env = append(os.Environ(), "PYTHON_PATH="+py)
	logf, _ := os.Create(filepath.Join(dir, "qubiqd.log"))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start qubiqd: %v", err)
	}
	defer stop(cmd)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var token string
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			if b, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap-token")); err == nil {
				token = strings.TrimSpace(string(b))
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "qubiqd.log"))
			t.Fatalf("qubiqd did not start:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	type flowInfo struct {
		Queue    int `json:"queue"`
		Counters struct {
			In, Processed, Errors, Dropped uint64
		} `json:"counters"`
	}
	flow := func(name string) flowInfo {
		var f flowInfo
		get(t, base+"/api/v1/flows/"+name, token, &f)
		return f
	}

	// Latency: a tag write over REST until the scaled value reaches pymodbus.
	srv.forget()
	var lat []float64
	for i := 1; i <= warmN+e2eN; i++ {
		v := 1000 + 10*i
		want := int(math.Round(float64(v)*0.1 + 3))
		sent := time.Now()
		if st, body := post(t, base+"/api/v1/tags/write", token, map[string]any{"writes": []map[string]any{{"path": "Bench/In", "value": v}}}); st != 200 {
			t.Fatalf("write: %d %s", st, body)
		}
		at, ok := srv.wait(want, sent, 10*time.Second)
		if !ok {
			log, _ := os.ReadFile(filepath.Join(dir, "qubiqd.log"))
			t.Fatalf("qubiqd: the write of %d never reached pymodbus; flow %+v\n%s", want, flow("e2e"), log)
		}
		if i > warmN {
			lat = append(lat, float64(at.Sub(sent).Microseconds())/1000)
		}
		time.Sleep(e2eGap)
	}
	fig["e2e_p50_ms"] = percentile(lat, 50)
	fig["e2e_p99_ms"] = percentile(lat, 99)

	// Throughput: a burst of tag changes into the flow's queue; measured
	// while the queue drains after the burst was written.
	before := flow("throughput").Counters.Processed
	cpu0, t0 := cpuTree(pid), time.Now()
	if st, body := post(t, base+"/api/v1/scripts/burst/burst/run", token, map[string]any{"args": map[string]any{"n": burstN}}); st != 200 {
		t.Fatalf("burst: %d %s", st, body)
	}
	cpu1, t1 := cpuTree(pid), time.Now()
	f1 := flow("throughput")
	var f2 flowInfo
	for {
		f2 = flow("throughput")
		if f2.Counters.Processed-before >= uint64(burstN) {
			break
		}
		if time.Since(t1) > 5*time.Minute {
			t.Fatalf("qubiqd: the burst did not drain: %+v", f2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cpu2, t2 := cpuTree(pid), time.Now()
	if f2.Counters.Dropped != 0 || f2.Counters.Errors != 0 {
		t.Fatalf("qubiqd: the burst dropped or failed messages: %+v", f2)
	}
	left := float64(f2.Counters.Processed - f1.Counters.Processed)
	fig["burst_write_s"] = t1.Sub(t0).Seconds()
	if left >= 0.2*float64(burstN) {
		fig["msgs_per_s"] = left / t2.Sub(t1).Seconds()
		fig["cores"] = (cpu2 - cpu1) / t2.Sub(t1).Seconds()
		fig["drain_msgs"] = left
	} else { // the flow kept up with the writes: the whole window
		fig["msgs_per_s"] = float64(burstN) / t2.Sub(t0).Seconds()
		fig["cores"] = (cpu2 - cpu0) / t2.Sub(t0).Seconds()
		fig["drain_msgs"] = 0
	}
}

// --- Node-RED ---

func benchNodeRED(t *testing.T, install string, srv *stamp, fig map[string]float64) {
	red := filepath.Join(install, "node_modules", "node-red", "red.js")
	if _, err := os.Stat(red); err != nil {
		t.Fatalf("Node-RED is not installed in %s (run.sh installs it): %v", install, err)
	}
	user := t.TempDir()
	port := peers.FreePort(t)
	flows := []map[string]any{
		{"id": "tab", "type": "tab", "label": "bench"},
		{"id": "client", "type": "modbus-client", "name": "pymodbus", "clienttype": "tcp",
			"bufferCommands": true, "stateLogEnabled": false, "queueLogEnabled": false, "failureLogEnabled": false,
			"tcpHost": "127.0.0.1", "tcpPort": strconv.Itoa(srv.port), "tcpType": "DEFAULT", "serialPort": "/dev/ttyUSB",
			"serialType": "RTU-BUFFERD", "serialBaudrate": "9600", "serialDatabits": "8", "serialStopbits": "1",
			"serialParity": "none", "serialConnectionDelay": "100", "serialAsciiResponseStartDelimiter": "0x3A",
			"unit_id": "1", "commandDelay": "1", "clientTimeout": "1000", "reconnectOnTimeout": true,
			"reconnectTimeout": "2000", "parallelUnitIdsAllowed": true},
		// Throughput: POST /burst {n} → a generator sending n messages → the arithmetic → a counter.
		{"id": "burst_in", "type": "http in", "z": "tab", "url": "/burst", "method": "post", "upload": false, "swaggerDoc": "",
			"wires": [][]string{{"gen", "ok"}}},
		{"id": "ok", "type": "http response", "z": "tab", "statusCode": "", "headers": map[string]string{}, "wires": [][]string{}},
		{"id": "gen", "type": "function", "z": "tab", "outputs": 1, "wires": [][]string{{"fn"}},
			"func": "const n = Number(msg.payload.n);\nglobal.set('target', (global.get('count') || 0) + n);\nglobal.set('t0', Date.now());\nfor (let i = 1; i <= n; i++) { node.send({payload: i}); }\nreturn null;"},
		{"id": "fn", "type": "function", "z": "tab", "outputs": 1, "wires": [][]string{{"count"}},
			"func": "msg.payload = msg.payload * 0.1 + 3;\nreturn msg;"},
		{"id": "count", "type": "function", "z": "tab", "outputs": 1, "wires": [][]string{{}},
			"func": "const c = (global.get('count') || 0) + 1;\nglobal.set('count', c);\nif (c === global.get('target')) { global.set('t1', Date.now()); }\nreturn null;"},
		{"id": "stats_in", "type": "http in", "z": "tab", "url": "/stats", "method": "get", "upload": false, "swaggerDoc": "",
			"wires": [][]string{{"stats"}}},
		{"id": "stats", "type": "function", "z": "tab", "outputs": 1, "wires": [][]string{{"stats_out"}},
			"func": "msg.payload = {count: global.get('count') || 0, target: global.get('target') || 0, t0: global.get('t0') || 0, t1: global.get('t1') || 0};\nreturn msg;"},
		{"id": "stats_out", "type": "http response", "z": "tab", "statusCode": "", "headers": map[string]string{}, "wires": [][]string{}},
		// Latency: POST /trigger {value} → the arithmetic → modbus-write of HR0.
		{"id": "trig_in", "type": "http in", "z": "tab", "url": "/trigger", "method": "post", "upload": false, "swaggerDoc": "",
			"wires": [][]string{{"scale", "trig_ok"}}},
		{"id": "trig_ok", "type": "http response", "z": "tab", "statusCode": "", "headers": map[string]string{}, "wires": [][]string{}},
		{"id": "scale", "type": "function", "z": "tab", "outputs": 1, "wires": [][]string{{"write"}},
			"func": "msg.payload = Math.round(Number(msg.payload.value) * 0.1 + 3);\nreturn msg;"},
		{"id": "write", "type": "modbus-write", "z": "tab", "name": "HR0", "showStatusActivities": false, "showErrors": false,
			"showWarnings": false, "unitid": "1", "dataType": "HoldingRegister", "adr": "0", "quantity": "1", "server": "client",
			"emptyMsgOnFail": false, "keepMsgProperties": false, "delayOnStart": false, "startDelayTime": "", "wires": [][]string{{}, {}}},
	}
	fb, _ := json.MarshalIndent(flows, "", " ")
	if err := os.WriteFile(filepath.Join(user, "flows.json"), fb, 0o644); err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf(`module.exports = {
  uiHost: "127.0.0.1", uiPort: %d, disableEditor: true, httpAdminRoot: false, httpNodeRoot: "/",
  credentialSecret: false, flowFile: "flows.json",
  logging: { console: { level: "warn", metrics: false, audit: false } }
};
`, port)
	if err := os.WriteFile(filepath.Join(user, "settings.js"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("taskset", "-c", "0", "node", red, "-u", user, "-s", filepath.Join(user, "settings.js"), "flows.json")
	cmd.Dir = install
	logf, _ := os.Create(filepath.Join(user, "nodered.log"))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Node-RED: %v", err)
	}
	defer stop(cmd)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	type stats struct {
		Count, Target, T0, T1 float64
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/stats")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(user, "nodered.log"))
			t.Fatalf("Node-RED did not start:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	// node-red-contrib-modbus drops what comes before its client is
	// connected: trigger until a write arrives.
	connected := false
	for try := 0; try < 60 && !connected; try++ {
		sent := time.Now()
		post(t, base+"/trigger", "", map[string]any{"value": 40000})
		_, connected = srv.wait(4003, sent, time.Second)
	}
	if !connected {
		log, _ := os.ReadFile(filepath.Join(user, "nodered.log"))
		t.Fatalf("Node-RED: no write reached pymodbus within 60 s:\n%s", log)
	}

	srv.forget()
	var lat []float64
	for i := 1; i <= warmN+e2eN; i++ {
		v := 5000 + 10*i
		want := int(math.Round(float64(v)*0.1 + 3))
		sent := time.Now()
		if st, body := post(t, base+"/trigger", "", map[string]any{"value": v}); st != 200 {
			t.Fatalf("Node-RED trigger: %d %s", st, body)
		}
		at, ok := srv.wait(want, sent, 10*time.Second)
		if !ok {
			log, _ := os.ReadFile(filepath.Join(user, "nodered.log"))
			t.Fatalf("Node-RED: the write of %d never reached pymodbus:\n%s", want, log)
		}
		if i > warmN {
			lat = append(lat, float64(at.Sub(sent).Microseconds())/1000)
		}
		time.Sleep(e2eGap)
	}
	fig["nodered_e2e_p50_ms"] = percentile(lat, 50)
	fig["nodered_e2e_p99_ms"] = percentile(lat, 99)

	cpu0, t0 := cpuTree(pid), time.Now()
	if st, body := post(t, base+"/burst", "", map[string]any{"n": burstN}); st != 200 {
		t.Fatalf("Node-RED burst: %d %s", st, body)
	}
	var s stats
	for {
		get(t, base+"/stats", "", &s)
		if s.T1 >= s.T0 && s.T0 > 0 && s.Count >= s.Target && s.Target > 0 {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			t.Fatalf("Node-RED: the burst did not finish: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cpu1, t1 := cpuTree(pid), time.Now()
	fig["nodered_msgs_per_s"] = float64(burstN) / ((s.T1 - s.T0) / 1000)
	fig["nodered_cores"] = (cpu1 - cpu0) / t1.Sub(t0).Seconds()
}
