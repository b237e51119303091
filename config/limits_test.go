package config

import (
	"strings"
	"testing"

	"qubiq.dev/edge/sandbox"
)

// Workers are limited unless the config says otherwise: absent limits are
// the defaults, unlimited turns one off, 0 is not a way to say unlimited.
func TestLoadDaemon_WorkerLimits(t *testing.T) {
	if DefaultMemoryMax != sandbox.DefaultMemoryMax || DefaultPidsMax != sandbox.DefaultPidsMax || DefaultCPUMax != sandbox.DefaultCPUMax {
		t.Fatal("config's worker-limit defaults differ from the sandbox's")
	}
	dir := t.TempDir()
	c, err := LoadDaemon(write(t, dir, "a.yaml", "python: {replicas: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Python.MemoryMax != 256<<20 || c.Python.PidsMax != 64 || c.Python.CPUMax != 1.0 {
		t.Fatalf("absent limits: %d %d %v, want 256MiB 64 1.0", c.Python.MemoryMax, c.Python.PidsMax, c.Python.CPUMax)
	}
	c, err = LoadDaemon(write(t, dir, "b.yaml", "python: {memory_max: unlimited, pids_max: 32, cpu_max: unlimited}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Python.MemoryMax != 0 || c.Python.PidsMax != 32 || c.Python.CPUMax != 0 {
		t.Fatalf("unlimited: %d %d %v", c.Python.MemoryMax, c.Python.PidsMax, c.Python.CPUMax)
	}
	_, err = LoadDaemon(write(t, dir, "c.yaml", "python:\n  memory_max: 1MiB\n  pids_max: 0\n  cpu_max: [1]\n"))
	for _, want := range []string{
		"line 2: python.memory_max: 1MiB is below the 16 MiB",
		"line 3: python.pids_max: \"0\": want a whole number of processes and threads, at least 1 (write unlimited to turn the limit off)",
		"line 4: python.cpu_max: want a limit or unlimited, got a list",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
