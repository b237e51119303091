// Package peers starts the real third-party peers integration tests talk to
// (README.md, "Two commands": make test installs them): the pymodbus Modbus TCP (and
// RTU-over-TCP) server from Debian's python3-pymodbus, run with
// /usr/bin/python3, and the node-opcua 2.160.0 server (opcua.go). A peer
// that cannot start fails the test loudly; it never skips. Imported by tests
// only.
package peers

import (
	"bufio"
	"embed"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed modbus_server.py modbus_client.py
var scripts embed.FS

// Python is the Debian interpreter that has python3-pymodbus; the first
// python3 on PATH may be another one without it.
const Python = "/usr/bin/python3"

// ModbusUnit is the initial content of one unit id: holding registers,
// input registers, coils and discrete inputs by zero-based PDU address.
type ModbusUnit struct {
	HR map[int]uint16 `json:"hr,omitempty"`
	IR map[int]uint16 `json:"ir,omitempty"`
	CO map[int]uint16 `json:"co,omitempty"`
	DI map[int]uint16 `json:"di,omitempty"`
}

// Modbus is a running pymodbus TCP server on 127.0.0.1:Port.
type Modbus struct {
	Port int
	t    testing.TB
	dir  string
	cfg  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartModbus starts a pymodbus server with the units' contents and stops it
// at the end of the test. It fails t when python3-pymodbus is missing or the
// server does not come up within 20 s.
func StartModbus(t testing.TB, units map[int]ModbusUnit) *Modbus {
	t.Helper()
	if out, err := exec.Command(Python, "-c", "import pymodbus").CombinedOutput(); err != nil {
		t.Fatalf("the Modbus peer needs Debian's python3-pymodbus at %s (make test installs it): %v: %s", Python, err, out)
	}
	dir := t.TempDir()
	for _, n := range []string{"modbus_server.py", "modbus_client.py"} {
		b, _ := scripts.ReadFile(n)
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &Modbus{t: t, dir: dir, Port: FreePort(t)}
	type unitJSON struct {
		HR map[string]uint16 `json:"hr,omitempty"`
		IR map[string]uint16 `json:"ir,omitempty"`
		CO map[string]uint16 `json:"co,omitempty"`
		DI map[string]uint16 `json:"di,omitempty"`
	}
	conv := func(in map[int]uint16) map[string]uint16 {
		out := map[string]uint16{}
		for k, v := range in {
			out[fmt.Sprint(k)] = v
		}
		return out
	}
	us := map[string]unitJSON{}
	for id, u := range units {
		us[fmt.Sprint(id)] = unitJSON{HR: conv(u.HR), IR: conv(u.IR), CO: conv(u.CO), DI: conv(u.DI)}
	}
	b, _ := json.Marshal(map[string]any{"port": m.Port, "units": us})
	m.cfg = filepath.Join(dir, "server.json")
	if err := os.WriteFile(m.cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

// Start (re)starts the server on the same port with its initial contents.
func (m *Modbus) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := exec.Command(Python, filepath.Join(m.dir, "modbus_server.py"), m.cfg)
		stdout, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			m.t.Fatalf("start pymodbus: %v", err)
		}
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
			if ok {
				m.cmd = cmd
				return
			}
		case <-time.After(20 * time.Second):
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if time.Now().After(deadline) {
			m.t.Fatalf("pymodbus did not start on port %d: %s", m.Port, stderr.String())
		}
		time.Sleep(200 * time.Millisecond) // the port may still be in TIME_WAIT
	}
}

// Stop kills the server (as an unplugged device would vanish).
func (m *Modbus) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
		m.cmd = nil
	}
}

// ReadHR reads count holding registers from the server with pymodbus's own
// client (not through qubiqd).
func (m *Modbus) ReadHR(unit, addr, count int) []uint16 {
	m.t.Helper()
	out, err := exec.Command(Python, filepath.Join(m.dir, "modbus_client.py"),
		fmt.Sprint(m.Port), fmt.Sprint(unit), fmt.Sprint(addr), fmt.Sprint(count)).CombinedOutput()
	if err != nil {
		m.t.Fatalf("read back from pymodbus: %v: %s", err, out)
	}
	var regs []uint16
	if err := json.Unmarshal(out, &regs); err != nil {
		m.t.Fatalf("read back from pymodbus: %q: %v", out, err)
	}
	return regs
}
