package peers

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ModbusOptions picks the optional modes of the pymodbus server (see
// modbus_server.py); the zero value is the plain Modbus TCP server that
// StartModbus runs.
type ModbusOptions struct {
	// RTU serves RTU frames (CRC, no MBAP header) on the TCP socket, as a
	// serial-to-Ethernet gateway does (pymodbus ModbusRtuFramer); the
	// driver's url is then rtu+tcp://127.0.0.1:Port.
	RTU bool
	// Sparse makes only the addresses given in each unit exist
	// (ModbusSparseDataBlock): a read or write touching any other one is
	// answered with exception 2 (illegal data address), so a block can
	// have a hole in the middle.
	Sparse bool
}

// StartModbusWith starts a pymodbus server like StartModbus, in the modes
// opts picks, and stops it at the end of the test.
func StartModbusWith(t testing.TB, opts ModbusOptions, units map[int]ModbusUnit) *Modbus {
	t.Helper()
	if opts == (ModbusOptions{}) {
		return StartModbus(t, units)
	}
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
		HR     map[string]uint16 `json:"hr,omitempty"`
		IR     map[string]uint16 `json:"ir,omitempty"`
		CO     map[string]uint16 `json:"co,omitempty"`
		DI     map[string]uint16 `json:"di,omitempty"`
		Sparse bool              `json:"sparse,omitempty"`
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
		us[fmt.Sprint(id)] = unitJSON{HR: conv(u.HR), IR: conv(u.IR), CO: conv(u.CO), DI: conv(u.DI), Sparse: opts.Sparse}
	}
	cfg := map[string]any{"port": m.Port, "units": us}
	if opts.RTU {
		cfg["framer"] = "rtu"
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.cfg = filepath.Join(m.dir, "server-opts.json")
	if err := os.WriteFile(m.cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}
