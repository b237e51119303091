package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// GoBinary builds the main package pkg of this module (e.g.
// "./bench/cmd/fastmodbus", relative to the repository root) once per test
// binary and returns the executable's path.
func GoBinary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "qubiq-bench-bin")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// Server is a benchmark's Modbus process: the fast server
// (bench/cmd/fastmodbus, pinned to core 1) or the floor client
// (bench/cmd/modbusfloor, core 0).
type Server struct {
	PID   int
	Ports []string // one per device
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	mu    sync.Mutex
}

// FastModbus starts bench/cmd/fastmodbus with ports listeners (static:
// values never change); t.Cleanup stops it.
func FastModbus(t testing.TB, ports int, static bool) *Server {
	t.Helper()
	args := []string{fmt.Sprintf("-ports=%d", ports)}
	if static {
		args = append(args, "-static")
	}
	s, line := startHelper(t, "./bench/cmd/fastmodbus", "1", args...)
	if !strings.HasPrefix(line, "READY ") {
		t.Fatalf("fastmodbus: not ready: %q", line)
	}
	s.Ports = strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "READY ")), ",")
	return s
}

// ModbusFloor starts bench/cmd/modbusfloor, pinned to core 0 as qubiqd
// is: one bare connection to each of ports, reading registers contiguous
// holding registers from 0 every second in requests of at most maxRegs
// (see its package comment). Its Requests counts the requests answered;
// t.Cleanup stops it.
func ModbusFloor(t testing.TB, ports []string, registers, maxRegs int) *Server {
	t.Helper()
	s, line := startHelper(t, "./bench/cmd/modbusfloor", "0", "-ports="+strings.Join(ports, ","),
		fmt.Sprintf("-registers=%d", registers), fmt.Sprintf("-max=%d", maxRegs))
	if line != "READY\n" {
		t.Fatalf("modbusfloor: not ready: %q", line)
	}
	return s
}

// startHelper builds and starts the main package pkg pinned to core with
// args, and returns it with the first line it printed; t.Cleanup stops it.
func startHelper(t testing.TB, pkg, core string, args ...string) (*Server, string) {
	t.Helper()
	cmd := exec.Command("taskset", append([]string{"-c", core, GoBinary(t, pkg)}, args...)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", pkg, err)
	}
	s := &Server{PID: cmd.Process.Pid, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: not ready: %q %v", pkg, line, err)
	}
	return s, line
}

// Stop ends the process now (t.Cleanup would at the end of the test).
func (s *Server) Stop() {
	s.stdin.Close()
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// Requests returns how many requests the server has answered (-1 when
// it does not say).
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.stdin.Write([]byte("n\n")); err != nil {
		return -1
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// CPU returns the server's CPU seconds so far.
func (s *Server) CPU() float64 {
	p, err := ReadProc(s.PID)
	if err != nil {
		return 0
	}
	return p.CPU
}

// NodeREDDir returns where run.sh installed node-red 4.1.8 and
// node-red-contrib-modbus 5.23.3 ($QUBIQ_BENCH_NODERED).
func NodeREDDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("QUBIQ_BENCH_NODERED")
	if d == "" {
		t.Fatal("QUBIQ_BENCH_NODERED must name the directory where run.sh installed node-red 4.1.8 and node-red-contrib-modbus 5.23.3")
	}
	if _, err := os.Stat(filepath.Join(d, "node_modules", "node-red", "red.js")); err != nil {
		t.Fatalf("Node-RED is not installed in %s (run.sh installs it): %v", d, err)
	}
	return d
}

// NodeRED is one Node-RED process started by StartNodeRED.
type NodeRED struct {
	PID  int
	Log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
}

// Exited returns an error with the end of its log when Node-RED is no
// longer running, else nil.
func (n *NodeRED) Exited() error {
	select {
	case <-n.done:
		b, _ := os.ReadFile(n.Log)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		return fmt.Errorf("Node-RED exited; its log:\n%s", b)
	default:
		return nil
	}
}

// StartNodeRED runs Node-RED headless (no editor, no HTTP nodes) over
// flows, pinned to core 0; t.Cleanup stops it. Node-RED takes a node whose
// name equals another node's id for a reference to it: keep names and ids
// apart.
func StartNodeRED(t testing.TB, flows []map[string]any) *NodeRED {
	t.Helper()
	install := NodeREDDir(t)
	user := t.TempDir()
	fb, _ := json.MarshalIndent(flows, "", " ")
	if err := os.WriteFile(filepath.Join(user, "flows.json"), fb, 0o644); err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf(`module.exports = {
  uiHost: "127.0.0.1", uiPort: %d, disableEditor: true, httpAdminRoot: false, httpNodeRoot: false,
  credentialSecret: false, flowFile: "flows.json",
  logging: { console: { level: "warn", metrics: false, audit: false } }
};
`, FreePort(t))
	if err := os.WriteFile(filepath.Join(user, "settings.js"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	red := filepath.Join(install, "node_modules", "node-red", "red.js")
	cmd := exec.Command("taskset", "-c", "0", "node", red, "-u", user, "-s", filepath.Join(user, "settings.js"), "flows.json")
	cmd.Dir = install
	n := &NodeRED{Log: filepath.Join(user, "nodered.log"), cmd: cmd}
	logf, err := os.Create(n.Log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Node-RED: %v", err)
	}
	logf.Close()
	n.PID = cmd.Process.Pid
	n.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(n.done) }()
	t.Cleanup(n.Stop)
	return n
}

// Stop sends SIGTERM and waits up to 10 s (then kills). Safe to call twice.
func (n *NodeRED) Stop() {
	if n.cmd == nil {
		return
	}
	cmd := n.cmd
	n.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-n.done
	}
}

// ModbusClientNode returns a node-red-contrib-modbus client config node
// for host:port at its best settings for polling (1 ms command delay,
// parallel unit ids, no logging).
func ModbusClientNode(id, name, host, port string) map[string]any {
	return map[string]any{"id": id, "type": "modbus-client", "name": name, "clienttype": "tcp",
		"bufferCommands": true, "stateLogEnabled": false, "queueLogEnabled": false, "failureLogEnabled": false,
		"tcpHost": host, "tcpPort": port, "tcpType": "DEFAULT", "serialPort": "/dev/ttyUSB", "serialType": "RTU-BUFFERD",
		"serialBaudrate": "9600", "serialDatabits": "8", "serialStopbits": "1", "serialParity": "none",
		"serialConnectionDelay": "100", "serialAsciiResponseStartDelimiter": "0x3A", "unit_id": "1",
		"commandDelay": "1", "clientTimeout": "1000", "reconnectOnTimeout": true, "reconnectTimeout": "2000",
		"parallelUnitIdsAllowed": true}
}

// ModbusReadNode returns a modbus-read node polling count holding
// registers from start every second through client, wired to next.
func ModbusReadNode(id, tab, client string, start, count int, next string) map[string]any {
	return map[string]any{"id": id, "type": "modbus-read", "z": tab,
		"name": "block " + id, "topic": "", "showStatusActivities": false, "logIOActivities": false,
		"showErrors": false, "unitid": "1", "dataType": "HoldingRegister", "adr": fmt.Sprint(start),
		"quantity": fmt.Sprint(count), "rate": "1", "rateUnit": "s", "delayOnStart": false, "startDelayTime": "",
		"server": client, "useIOFile": false, "ioFile": "", "useIOForPayload": false, "emptyMsgOnFail": false,
		"x": 200, "y": 40, "wires": [][]string{{next}, {}}}
}
