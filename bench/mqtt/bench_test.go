//go:build bench

package mqttbench

import (
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// The workload.
const (
	scan       = 100 * time.Millisecond // each tag changes at every scan
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

// counter is a subscriber counting messages and tag values.
type counter struct {
	msgs, values atomic.Int64
	last         atomic.Int64 // UnixNano of the last message
	c            paho.Client
}

func subscribe(t *testing.T, url, filter string) *counter {
	n := &counter{}
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("bench-sub-%d", time.Now().UnixNano())).
		SetOrderMatters(false).SetAutoReconnect(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			n.msgs.Add(1)
			n.last.Store(time.Now().UnixNano())
			p := m.Payload()
			if strings.HasSuffix(m.Topic(), "/tags") {
				n.values.Add(int64(strings.Count(string(p), `"p":`)))
			} else {
				n.values.Add(1)
			}
		}).
		SetOnConnectHandler(func(c paho.Client) { c.Subscribe(filter, 0, nil).Wait() })
	n.c = paho.NewClient(o)
	if tok := n.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber: %v", tok.Error())
	}
	time.Sleep(200 * time.Millisecond)
	t.Cleanup(func() { n.c.Disconnect(100) })
	return n
}

// daemon is one qubiqd.
type daemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	dir  string
}

// nTags is the simulator tags (BENCH_TAGS, default 5,000: 50,000 values/s
// offered).
var nTags = 5000

func project(tags, qos int, batched bool) string {
	var b strings.Builder
	b.WriteString("devices:\n  - {name: sim, driver: sim}\ntags:\n")
	for i := range tags {
		fmt.Fprintf(&b, "  - {path: Bench/T%05d, device: sim, address: \"ramp(0,1000000,1000s)\", type: float64, scan: %s}\n", i, scan)
	}
	fmt.Fprintf(&b, "mqtt_publish:\n  batched: %v\n  rules:\n    - {prefix: Bench, mode: change, qos: %d}\n", batched, qos)
	return b.String()
}

func startDaemon(t *testing.T, bin, brokerURL string, tags, qos int, batched bool) *daemon {
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
	os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project(tags, qos, batched)), 0o644)
	args := []string{filepath.Join(bin, "qubiqd"), "--config", filepath.Join(dir, "qubiq.yaml")}
	pin, set := os.LookupEnv("BENCH_PIN")
	if !set {
		pin = "0"
	}
	if tk, err := exec.LookPath("taskset"); err == nil && pin != "" {
		args = append([]string{tk, "-c", pin}, args...) // taskset execs qubiqd in place: the same pid
	}
	cmd := exec.Command(args[0], args[1:]...)
	logf, _ := os.Create(filepath.Join(dir, "qubiqd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir}
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

// publishRate runs qubiqd with the policy and measures the values per
// second the subscriber receives over window, and qubiqd's and the
// broker's CPU seconds over it.
func publishRate(t *testing.T, bin string, b *broker, qos int, batched bool, window time.Duration) (perS, cpu, brokerCPU float64) {
	sub := subscribe(t, b.url(), "qubiq/v1/"+appliance+"/tags/#") // tags/# holds tags too (MQTT 3.1.1 §4.7.1.2)
	defer sub.c.Disconnect(50)
	d := startDaemon(t, bin, b.url(), nTags, qos, batched)
	defer d.stop()
	time.Sleep(warmup)
	v0, c0, bc0 := sub.values.Load(), procCPU(t, d.cmd.Process.Pid), procCPU(t, b.cmd.Process.Pid)
	time.Sleep(window)
	v1, c1, bc1 := sub.values.Load(), procCPU(t, d.cmd.Process.Pid), procCPU(t, b.cmd.Process.Pid)
	return float64(v1-v0) / window.Seconds(), c1 - c0, bc1 - bc0
}

// floorRate is mosquitto_pub publishing floorMsgs per-tag payloads (one
// per line, -l) at QoS 0 to the same broker: messages per second the
// subscriber receives, from the start to the last message.
func floorRate(t *testing.T, b *broker) float64 {
	sub := subscribe(t, b.url(), "qubiq/v1/"+appliance+"/tags/#")
	defer sub.c.Disconnect(50)
	f, err := os.CreateTemp(t.TempDir(), "payloads")
	if err != nil {
		t.Fatal(err)
	}
	for i := range floorMsgs {
		fmt.Fprintf(f, `{"v":%d.5,"q":"Good","t":"2026-12-01T10:00:00.123456Z","seq":%d}`+"\n", i, 1764583200000000+i)
	}
	f.Seek(0, 0)
	cmd := exec.Command("mosquitto_pub", "-h", "127.0.0.1", "-p", strconv.Itoa(b.port), "-q", "0",
		"-t", "qubiq/v1/"+appliance+"/tags/Bench/T00000", "-l")
	cmd.Stdin = f
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	for prev := int64(-1); sub.msgs.Load() != prev; {
		prev = sub.msgs.Load()
		time.Sleep(500 * time.Millisecond)
	}
	end := time.Unix(0, sub.last.Load())
	return float64(sub.msgs.Load()) / end.Sub(start).Seconds()
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
	d := startDaemon(t, bin, b.url(), drainTags, 1, false)
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
	var q0, q1, qb, floor, drain, cpu, bcpu []float64
	for r := range runs {
		b := newBroker(t)
		b.start()
		r0, c0, bc0 := publishRate(t, bin, b, 0, false, window)
		r1, c1, bc1 := publishRate(t, bin, b, 1, false, window)
		rb, cb, bcb := publishRate(t, bin, b, 1, true, window)
		fl := floorRate(t, b)
		dr := drainRate(t, bin, b)
		b.stop()
		fmt.Fprintf(os.Stderr, "run %d: qos0_per_s=%.0f qos1_per_s=%.0f qos1_batched_per_s=%.0f mosquitto_pub_per_s=%.0f drain_per_s=%.0f cpu_s=%.2f broker_cpu_s=%.2f\n",
			r+1, r0, r1, rb, fl, dr, c0+c1+cb, bc0+bc1+bcb)
		q0, q1, qb, floor, drain = append(q0, r0), append(q1, r1), append(qb, rb), append(floor, fl), append(drain, dr)
		cpu, bcpu = append(cpu, c0+c1+cb), append(bcpu, bc0+bc1+bcb)
	}
	fmt.Printf("bench-mqtt: qos0_per_s=%.0f qos1_per_s=%.0f qos1_batched_per_s=%.0f mosquitto_pub_ratio=%.2f drain_per_s=%.0f cpu_s=%.2f broker_cpu_s=%.2f\n",
		median(q0), median(q1), median(qb), median(q0)/median(floor), median(drain), median(cpu), median(bcpu))
}
