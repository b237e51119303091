package sandbox

import (
	"strings"
	"testing"
	"time"
)

func TestConfig_ApplyEnv_Overrides(t *testing.T) {
	env := map[string]string{"PYTHON_PATH": "/opt/py/bin/python3", "PYTHON_WORKER_REPLICAS": "4", "PYTHONPATH": "/ignored"}
	c := DefaultConfig()
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.PythonPath != "/opt/py/bin/python3" || c.Replicas != 4 {
		t.Errorf("got %q %d", c.PythonPath, c.Replicas)
	}
	env["PYTHON_WORKER_REPLICAS"] = "zero"
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil ||
		!strings.Contains(err.Error(), "PYTHON_WORKER_REPLICAS") {
		t.Errorf("bad replicas: %v", err)
	}
}

func TestConfig_Validate_NamesEveryField(t *testing.T) {
	var c Config
	c.Replicas = 0
	c.MemoryMax = 1
	err := c.Validate()
	for _, want := range []string{"python.path", "python.replicas", "data_dir", "python.gateway_timeout", "python.node_timeout", "python.memory_max"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to name %s", err, want)
		}
	}
	d := DefaultConfig()
	d.DataDir = "/var/lib/qubiq"
	if err := d.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestConfig_ClampTimeout(t *testing.T) {
	c := DefaultConfig()
	tests := []struct {
		ms   int
		want time.Duration
	}{
		{0, 10 * time.Second},
		{2000, 2 * time.Second},
		{1, 10 * time.Millisecond},
		{1 << 62, 10 * time.Minute},
		{-5, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := c.clampTimeout(tt.ms); got != tt.want {
			t.Errorf("clampTimeout(%d) = %v, want %v", tt.ms, got, tt.want)
		}
	}
}

// Workers are limited unless the config says otherwise: 256 MiB, 64
// processes and threads, 1 core; health names the limits that are off.
func TestConfig_DefaultLimitsAndHealthNamesOffOnes(t *testing.T) {
	d := DefaultConfig()
	if d.MemoryMax != 256<<20 || d.PidsMax != 64 || d.CPUMax != 1.0 || len(d.OffLimits()) != 0 {
		t.Fatalf("defaults %d %d %v, off %v", d.MemoryMax, d.PidsMax, d.CPUMax, d.OffLimits())
	}
	d.PidsMax, d.CPUMax = 0, 0
	if got := strings.Join(d.OffLimits(), ","); got != "pids_max,cpu_max" {
		t.Fatalf("off %q", got)
	}
	mem, pids, cpu := limitStates("cgroup2", []string{"memory", "pids", "cpu"}, d, false)
	if !strings.HasPrefix(mem, "enforced") || pids != "off (python.pids_max: unlimited)" || cpu != "off (python.cpu_max: unlimited)" {
		t.Fatalf("health states %q %q %q", mem, pids, cpu)
	}
}
