//go:build bench

package mqttbench

import (
	"bufio"
	"bytes"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The workload.
const (
	scan       = 100 * time.Millisecond // each tag changes at every scan
	q0Scan     = 20 * time.Millisecond  // the scan of the QoS 0 run
	drainCount = 100000                 // messages queued during the outage
	floorMsgs  = 200000                 // messages mosquitto_pub publishes
	warmup     = 3 * time.Second
	clkTck     = 100 // USER_HZ of /proc/<pid>/stat on Linux
	appliance  = "bench-01"
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
	if err != nil || d < 2*time.Second {
		t.Fatalf("%s=%q: want a duration of 2s or more", k, v)
	}
	return d
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

// broker is a Mosquitto of the benchmark's own on a free port.
type broker struct {
	t    *testing.T
	port int
	conf string
	cmd  *exec.Cmd
}

func newBroker(t *testing.T) *broker {
	dir := t.TempDir()
	b := &broker{t: t, port: freePort(t), conf: filepath.Join(dir, "mosquitto.conf")}
	conf := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\nmax_inflight_messages 0\nlog_dest none\n", b.port)
	if err := os.WriteFile(b.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stop)
	return b
}

func (b *broker) start() {
	b.cmd = exec.Command("/usr/sbin/mosquitto", "-c", b.conf)
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	for range 200 {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.t.Fatal("mosquitto did not listen")
}

func (b *broker) stop() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.cmd.Wait()
	b.cmd = nil
}

func (b *broker) url() string { return fmt.Sprintf("tcp://127.0.0.1:%d", b.port) }

// counter is a subscriber counting messages and tag values, and keeping
// the first keep payloads it receives. It is a minimal MQTT 3.1.1 client
// of its own (CONNECT, one QoS 0 SUBSCRIBE, then PUBLISH packets read in
// one goroutine with no allocation but the kept payloads), so the
// subscriber costs far less per message than either publisher and neither
// figure is the subscriber's (a paho subscriber, one goroutine per
// message, took a whole core at ~210,000 messages/s).
type counter struct {
	msgs, values atomic.Int64
	first, last  atomic.Int64 // UnixNano of the first and the last message
	conn         net.Conn
	once         sync.Once

	mu       sync.Mutex
	keep     int
	payloads [][]byte
}

// readPacket reads one MQTT packet: its first byte and its body (into
// buf, grown as needed).
func readPacket(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	h, err := r.ReadByte()
	if err != nil {
		return 0, buf, err
	}
	n, mul := 0, 1
	for {
		d, err := r.ReadByte()
		if err != nil {
			return 0, buf, err
		}
		n += int(d&0x7f) * mul
		mul *= 128
		if d&0x80 == 0 {
			break
		}
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err = io.ReadFull(r, buf)
	return h, buf, err
}

func mqttString(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }

func subscribe(t *testing.T, url, filter string, keep int) *counter {
	n := &counter{keep: keep}
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatalf("subscriber: %v", err)
	}
	n.conn = c
	t.Cleanup(n.close)
	id := fmt.Sprintf("bench-sub-%d", time.Now().UnixNano())
	body := append(mqttString("MQTT"), 4, 0x02, 0, 0) // level 4, clean session, no keep-alive
	body = append(body, mqttString(id)...)
	c.Write(append([]byte{0x10, byte(len(body))}, body...))
	sub := append([]byte{0, 1}, mqttString(filter)...)
	sub = append(sub, 0)
	c.Write(append([]byte{0x82, byte(len(sub))}, sub...))
	subscribed := make(chan struct{})
	go func() {
		r := bufio.NewReaderSize(c, 1<<18)
		var buf []byte
		for {
			var h byte
			var err error
			h, buf, err = readPacket(r, buf)
			if err != nil {
				return
			}
			switch h >> 4 {
			case 9: // SUBACK
				close(subscribed)
			case 3: // PUBLISH
				now := time.Now().UnixNano()
				n.msgs.Add(1)
				n.first.CompareAndSwap(0, now)
				n.last.Store(now)
				tl := int(buf[0])<<8 | int(buf[1])
				topic, p := buf[2:2+tl], buf[2+tl:]
				if h&0x06 != 0 {
					p = p[2:] // a packet id (never: the subscription is QoS 0)
				}
				if n.keep > 0 {
					n.mu.Lock()
					if len(n.payloads) < n.keep {
						n.payloads = append(n.payloads, slices.Clone(p))
					}
					n.mu.Unlock()
				}
				if bytes.HasSuffix(topic, []byte("/tags")) {
					n.values.Add(int64(bytes.Count(p, []byte(`"p":`))))
				} else {
					n.values.Add(1)
				}
			}
		}
	}()
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("subscriber: no SUBACK within 10 s")
	}
	return n
}

// close disconnects the subscriber.
func (n *counter) close() {
	n.once.Do(func() {
		n.conn.Write([]byte{0xe0, 0})
		n.conn.Close()
	})
}

// daemon is one qubiqd.
type daemon struct {
	t     *testing.T
	cmd   *exec.Cmd
	base  string
	dir   string
	pprof string // host:port of net/http/pprof (BENCH_PROFILE set), else empty
}

// nTags is the simulator tags (BENCH_TAGS, default 5,000). At QoS 1 they
// are scanned every 100 ms (50,000 values/s offered); the QoS 0 run scans
// them every 20 ms (250,000 values/s offered), more than qubiqd publishes
// on this machine, so its figure is the link's ceiling and not the
// offered rate, as mosquitto_pub's is its own. (More tags instead would
// make each scan a burst larger than the link's subscription buffer,
// 8,192 changes, on one core: the figure would count that buffer.)
var nTags = 5000

func project(tags int, scan time.Duration, qos int, batched bool) string {
	var b strings.Builder
	b.WriteString("devices:\n  - {name: sim, driver: sim}\ntags:\n")
	for i := range tags {
		fmt.Fprintf(&b, "  - {path: Bench/T%05d, device: sim, address: \"ramp(0,1000000,1000s)\", type: float64, scan: %s}\n", i, scan)
	}
	fmt.Fprintf(&b, "mqtt_publish:\n  batched: %v\n  rules:\n    - {prefix: Bench, mode: change, qos: %d}\n", batched, qos)
	return b.String()
}

func startDaemon(t *testing.T, bin, brokerURL string, tags int, scan time.Duration, qos int, batched bool) *daemon {
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf(`appliance_id: %s
data_dir: data
project: project.yaml
http: {listen: "127.0.0.1:%d"}
python: {replicas: 1}
mqtt:
  brokers: [%q]
  require_signed: true
  reconnect: {min: 100ms, max: 500ms}
  outbox: {max_bytes: 1GiB, max_age: 1h, live_latency: 2s}
`, appliance, port, brokerURL)
	os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644)
	os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project(tags, scan, qos, batched)), 0o644)
	args := []string{filepath.Join(bin, "qubiqd"), "--config", filepath.Join(dir, "qubiq.yaml")}
	args = pinned(args...)
	cmd := exec.Command(args[0], args[1:]...)
	pprof := ""
	if os.Getenv("BENCH_PROFILE") != "" { // a binary built with -tags benchprofile (make profile-mqtt)
		pprof = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cmd.Env = append(os.Environ(), "QUBIQ_BENCH_PPROF="+pprof)
	}
	logf, _ := os.Create(filepath.Join(dir, "qubiqd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir, pprof: pprof}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(d.base + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			return d
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "qubiqd.log"))
			t.Fatalf("qubiqd did not answer within 90 s:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-done
	}
}

// profile takes a CPU profile of d over window into
// BENCH_PROFILE_DIR/name (default build/bench/profiles).
func (d *daemon) profile(name string, window time.Duration) {
	dir := os.Getenv("BENCH_PROFILE_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "bench", "profiles")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.t.Fatal(err)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.pprof, int(window.Seconds())))
	if err != nil {
		d.t.Fatalf("profile: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		d.t.Fatalf("profile: %v %s", err, resp.Status)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		d.t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "profile: %s\n", filepath.Join(dir, name))
}

// depth is the outbox depth and whether the link is connected (health).
func (d *daemon) depth() (int, bool) {
	resp, err := http.Get(d.base + "/api/v1/health")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		MQTT struct {
			Connected bool `json:"connected"`
			Depth     int  `json:"outbox_depth"`
		} `json:"mqtt"`
	}
	json.NewDecoder(resp.Body).Decode(&h)
	return h.MQTT.Depth, h.MQTT.Connected
}

// publishRate runs qubiqd with tags tags scanned every scan and the policy and measures the
// values per second the subscriber receives over window, and qubiqd's
// and the broker's CPU seconds over it. It returns the first keep
// payloads received too. With BENCH_PROFILE set and profName not empty,
// the window is a CPU profile of qubiqd, written to
// BENCH_PROFILE_DIR/profName.
func publishRate(t *testing.T, bin string, b *broker, profName string, tags int, scan time.Duration, qos int, batched bool, window time.Duration, keep int) (perS, cpu, brokerCPU float64, payloads [][]byte) {
	sub := subscribe(t, b.url(), "qubiq/v1/"+appliance+"/tags/#", keep) // tags/# holds tags too (MQTT 3.1.1 §4.7.1.2)
	defer sub.close()
	d := startDaemon(t, bin, b.url(), tags, scan, qos, batched)
	defer d.stop()
	time.Sleep(warmup)
	v0, c0, bc0, sc0 := sub.values.Load(), procCPU(t, d.cmd.Process.Pid), procCPU(t, b.cmd.Process.Pid), procCPU(t, os.Getpid())
	if d.pprof != "" && profName != "" {
		d.profile(profName, window)
	} else {
		time.Sleep(window)
	}
	v1, c1, bc1, sc1 := sub.values.Load(), procCPU(t, d.cmd.Process.Pid), procCPU(t, b.cmd.Process.Pid), procCPU(t, os.Getpid())
	fmt.Fprintf(os.Stderr, "qos %d batched %v: %.0f values/s, cpu_s qubiqd %.2f broker %.2f subscriber %.2f\n",
		qos, batched, float64(v1-v0)/window.Seconds(), c1-c0, bc1-bc0, sc1-sc0)
	sub.mu.Lock()
	payloads = sub.payloads
	sub.mu.Unlock()
	return float64(v1-v0) / window.Seconds(), c1 - c0, bc1 - bc0, payloads
}

// pinned prefixes args with taskset to the core qubiqd runs on
// (BENCH_PIN, default 0; empty: not pinned).
func pinned(args ...string) []string {
	pin, set := os.LookupEnv("BENCH_PIN")
	if !set {
		pin = "0"
	}
	if tk, err := exec.LookPath("taskset"); err == nil && pin != "" {
		return append([]string{tk, "-c", pin}, args...) // taskset execs the program in place: the same pid
	}
	return args
}

// floorTopic is mosquitto_pub's topic: one of the per-tag topics, as long
// as each of them and as many levels deep.
const floorTopic = "qubiq/v1/" + appliance + "/tags/Bench/T00000"

// floorRate is mosquitto_pub, pinned like qubiqd, publishing payloads
// (the per-tag payloads qubiqd published at QoS 0, one per line, -l) at
// QoS 0 to the same broker, as often as it takes to send floorMsgs:
// messages per second the subscriber receives, measured as qubiqd's are
// (by the subscriber, in the steady state): from the first message
// received to the last; and mosquitto_pub's CPU seconds.
func floorRate(t *testing.T, b *broker, payloads [][]byte) (perS, cpu float64) {
	if len(payloads) == 0 {
		t.Fatal("no QoS 0 payloads to publish with mosquitto_pub")
	}
	sub := subscribe(t, b.url(), "qubiq/v1/"+appliance+"/tags/#", 0)
	defer sub.close()
	f, err := os.CreateTemp(t.TempDir(), "payloads")
	if err != nil {
		t.Fatal(err)
	}
	for i := range floorMsgs {
		p := payloads[i%len(payloads)]
		if slices.Contains(p, '\n') {
			t.Fatalf("payload with a newline: %q", p)
		}
		f.Write(p)
		f.Write([]byte{'\n'})
	}
	f.Seek(0, 0)
	args := pinned("mosquitto_pub", "-h", "127.0.0.1", "-p", strconv.Itoa(b.port), "-q", "0", "-t", floorTopic, "-l")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	for prev := int64(-1); sub.msgs.Load() != prev; {
		prev = sub.msgs.Load()
		time.Sleep(500 * time.Millisecond)
	}
	n := sub.msgs.Load()
	if n < floorMsgs {
		t.Fatalf("the subscriber received %d of mosquitto_pub's %d messages", n, floorMsgs)
	}
	return float64(n-1) / time.Duration(sub.last.Load()-sub.first.Load()).Seconds(), cpu
}

// drainTags are the tags of the drain run: 1,000 at 10 Hz, 10,000 live
// values/s beside the backlog.
const drainTags = 1000

// drainRate queues drainCount messages while the broker is down (QoS 1,
// one per tag), starts the broker, and measures how fast the outbox
// drains: the backlog plus what the tags made meanwhile, over the time
// until the outbox is back to its live level.
func drainRate(t *testing.T, bin string, b *broker) float64 {
	b.stop()
	d := startDaemon(t, bin, b.url(), drainTags, scan, 1, false)
	defer d.stop()
	var n0 int
	t0 := time.Now()
	for {
		n, _ := d.depth()
		if n >= drainCount {
			n0 = n
			break
		}
		if time.Since(t0) > 5*time.Minute {
			t.Fatalf("the outbox reached %d of %d in 5 min", n, drainCount)
		}
		time.Sleep(100 * time.Millisecond)
	}
	inRate := float64(n0) / time.Since(t0).Seconds()
	b.start()
	start := time.Now()
	for {
		n, up := d.depth()
		if up && n < int(inRate) { // under a second of live values: drained
			el := time.Since(start).Seconds()
			return (float64(n0) + inRate*el - float64(n)) / el
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("the outbox still holds %d after 5 min", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func TestBenchMQTT(t *testing.T) {
	bin := os.Getenv("QUBIQ_BIN")
	if bin == "" {
		t.Fatal("QUBIQ_BIN must name the directory holding qubiqd (run.sh sets it)")
	}
	runs := envInt(t, "BENCH_RUNS", 3)
	nTags = envInt(t, "BENCH_TAGS", nTags)
	window := envDur(t, "BENCH_WINDOW", 10*time.Second)
	var q0, q1, qb, floor, drain, cpu, bcpu, c0s, plen, us0, usf []float64
	for r := range runs {
		b := newBroker(t)
		b.start()
		r0, c0, bc0, payloads := publishRate(t, bin, b, "mqtt-qos0-qubiqd.cpu.pprof", nTags, q0Scan, 0, false, window, floorMsgs)
		r1, c1, bc1, _ := publishRate(t, bin, b, "", nTags, scan, 1, false, window, 0)
		rb, cb, bcb, _ := publishRate(t, bin, b, "", nTags, scan, 1, true, window, 0)
		fl, flCPU := floorRate(t, b, payloads)
		dr := drainRate(t, bin, b)
		b.stop()
		var bytes int
		for _, p := range payloads {
			bytes += len(p)
		}
		pl := float64(bytes) / float64(max(len(payloads), 1))
		fmt.Fprintf(os.Stderr, "run %d: qos0_per_s=%.0f qos1_per_s=%.0f qos1_batched_per_s=%.0f mosquitto_pub_per_s=%.0f drain_per_s=%.0f cpu_s=%.2f broker_cpu_s=%.2f qos0_cpu_s=%.2f payload_bytes=%.1f\n",
			r+1, r0, r1, rb, fl, dr, c0+c1+cb, bc0+bc1+bcb, c0, pl)
		q0, q1, qb, floor, drain = append(q0, r0), append(q1, r1), append(qb, rb), append(floor, fl), append(drain, dr)
		cpu, bcpu, c0s, plen = append(cpu, c0+c1+cb), append(bcpu, bc0+bc1+bcb), append(c0s, c0), append(plen, pl)
		us0, usf = append(us0, c0/(r0*window.Seconds())*1e6), append(usf, flCPU/floorMsgs*1e6)
	}
	// The detail line (stderr, before the result): what the QoS 0 phase
	// offered (its tags at one change per scan), the floor's own rate,
	// qubiqd's CPU over the QoS 0 window, the payloads' mean size, and the
	// CPU microseconds per value published of qubiqd (its whole process:
	// the engine, the store and every subscriber too) and of mosquitto_pub.
	fmt.Fprintf(os.Stderr, "bench-mqtt-detail: qos0_offered_per_s=%.0f mosquitto_pub_per_s=%.0f qos0_cpu_s=%.2f payload_bytes=%.1f qos0_cpu_us_per_value=%.2f mosquitto_pub_cpu_us_per_msg=%.2f\n",
		float64(nTags)/q0Scan.Seconds(), median(floor), median(c0s), median(plen), median(us0), median(usf))
	fmt.Printf("bench-mqtt: qos0_per_s=%.0f qos1_per_s=%.0f qos1_batched_per_s=%.0f mosquitto_pub_ratio=%.2f drain_per_s=%.0f cpu_s=%.2f broker_cpu_s=%.2f\n",
		median(q0), median(q1), median(qb), median(q0)/median(floor), median(drain), median(cpu), median(bcpu))
}
