package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/internal/deptest"
	"qubiq.dev/edge/value"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDeps_Config(t *testing.T) {
	deptest.Forbid(t, "qubiq.dev/edge/config", "qubiq.dev/edge/api", "qubiq.dev/edge/store",
		"qubiq.dev/edge/sandbox", "qubiq.dev/edge/mqtt", "qubiq.dev/edge/daemon", "qubiq.dev/edge/device/modbus")
}

func TestLoadDaemon_DefaultsAndRelativePaths(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "q.yaml", "data_dir: var\nproject: p.yaml\npython: {memory_max: 256MiB, gateway_timeout: {default: 10s, min: 10ms, max: 10m}}\nhistory: {retention: {max_age: 35d, max_bytes: 2GiB}}\n")
	t.Setenv("PYTHON_PATH", "")
	t.Setenv("PYTHON_WORKER_REPLICAS", "")
	c, err := LoadDaemon(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != filepath.Join(dir, "var") || c.Project != filepath.Join(dir, "p.yaml") {
		t.Fatalf("paths not resolved against the file: %q %q", c.DataDir, c.Project)
	}
	if c.HTTP.Listen != DefaultListen || c.Python.Replicas != 2 || c.Store.OpenTimeout.D() != 5*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	if c.Python.MemoryMax != 256<<20 || c.History.Retention.MaxBytes != 2<<30 || c.History.Retention.MaxAge.D() != 35*24*time.Hour {
		t.Fatalf("sizes/durations: %d %d %v", c.Python.MemoryMax, c.History.Retention.MaxBytes, c.History.Retention.MaxAge.D())
	}
	if c.Python.GatewayTimeout.Min.D() != 10*time.Millisecond {
		t.Fatalf("gateway min %v", c.Python.GatewayTimeout.Min.D())
	}
}

func TestLoadDaemon_EnvOverrides(t *testing.T) {
	p := write(t, t.TempDir(), "q.yaml", "python: {path: /nope, replicas: 3}\n")
	t.Setenv("PYTHON_PATH", "/opt/py/bin/python3")
	t.Setenv("PYTHON_WORKER_REPLICAS", "5")
	c, err := LoadDaemon(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Python.Path != "/opt/py/bin/python3" || c.Python.Replicas != 5 {
		t.Fatalf("env overrides not applied: %+v", c.Python)
	}
	t.Setenv("PYTHON_WORKER_REPLICAS", "lots")
	if _, err := LoadDaemon(p); err == nil || !strings.Contains(err.Error(), "PYTHON_WORKER_REPLICAS") {
		t.Fatalf("bad replicas env: %v", err)
	}
}

func TestLoadDaemon_UnknownKeyNamesKeyAndLine(t *testing.T) {
	p := write(t, t.TempDir(), "q.yaml", "appliance_id: x\nhttp:\n  listen: 127.0.0.1:1\n  lisen: oops\n")
	_, err := LoadDaemon(p)
	if err == nil || !strings.Contains(err.Error(), `unknown key "lisen" in http (valid keys: listen, tls)`) || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "q.yaml") {
		t.Fatalf("err = %v, want file, line 4 and the key", err)
	}
}

func TestLoadDaemon_BadValues(t *testing.T) {
	cases := map[string]string{
		"level":    "security: {baseline_write_level: boss}\n",
		"duration": "store: {open_timeout: soon}\n",
		"size":     "python: {memory_max: lots}\n",
		"port":     "http: {listen: \"127.0.0.1:99999\"}\n",
		"hostport": "http: {listen: \"8080\"}\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := LoadDaemon(write(t, t.TempDir(), "q.yaml", body)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestParseProject_TagsConverted(t *testing.T) {
	p, err := ParseProject([]byte(`devices:
  - {name: plc1, driver: modbus, url: "tcp://10.0.0.5:502", unit_id: 1, timeout: 1s}
tags:
  - {path: Line1/Pump/Speed, device: plc1, address: HR100, type: float32, byte_order: CDAB,
     scan: 1s, deadband: {absolute: 0.1}, scale: {factor: 0.1, offset: 0}, units: rpm,
     write_level: supervise, read_only: false, unit_id: 2}
  - {path: Line1/Level, device: plc1, address: HR1, type: uint16, scale: {raw: [0, 1000], eng: [0, 100]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Devices[0].Raw) == "" || !strings.Contains(string(p.Devices[0].Raw), `"unit_id":1`) {
		t.Fatalf("device raw = %s", p.Devices[0].Raw)
	}
	tags, err := p.EngineTags()
	if err != nil {
		t.Fatal(err)
	}
	t0 := tags[0]
	if t0.Point.Type != value.Float32 || t0.Point.ByteOrder != "CDAB" || t0.Point.UnitID != 2 || t0.WriteLevel != auth.LevelSupervise ||
		t0.Scan != time.Second || t0.Deadband.Absolute != 0.1 || t0.Scale.Factor != 0.1 {
		t.Fatalf("tag 0 = %+v", t0)
	}
	if got := tags[1].Scale.ToEng(int64(500)); got != 50.0 {
		t.Fatalf("range scale 500 -> %v, want 50", got)
	}
}

func TestParseProject_EveryBadTagNamedWithLine(t *testing.T) {
	p, err := ParseProject([]byte(`devices: [{name: sim, driver: sim}]
tags:
  - {path: Good/One, device: sim, address: memory, type: int16}
  - {path: "Bad//Path", device: sim, address: memory, type: int16}
  - {path: Bad/Type, device: sim, address: memory, type: float128}
  - {path: Bad/Level, device: sim, address: memory, type: int16, write_level: boss}
`))
	if err != nil {
		t.Fatal(err)
	}
	p.File = "project.yaml"
	_, err = p.EngineTags()
	if err == nil {
		t.Fatal("bad tags accepted")
	}
	for _, want := range []string{"project.yaml:4", "Bad//Path", "project.yaml:5", "float128", "project.yaml:6", "boss"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "Good/One") {
		t.Errorf("good tag reported: %v", err)
	}
}

func TestParseProject_UnknownTagKey(t *testing.T) {
	_, err := ParseProject([]byte("tags:\n  - {path: A, device: sim, adress: memory}\n"))
	if err == nil || !strings.Contains(err.Error(), "adress") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseProject_UnknownKeyStillReportsTheRest(t *testing.T) {
	p, err := ParseProject([]byte("tags:\n  - {path: A, device: sim, address: memory, scna: 1s}\n  - {path: B, device: sim, address: memory, type: boolean}\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown key "scna" in a tag`) {
		t.Fatalf("err = %v", err)
	}
	if p == nil || len(p.Tags) != 2 {
		t.Fatalf("no project to go on with: %+v", p)
	}
	if _, terr := p.EngineTags(); terr == nil || !strings.Contains(terr.Error(), "boolean") {
		t.Fatalf("the second problem is not found in the same run: %v", terr)
	}
}
