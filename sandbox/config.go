package sandbox

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Config is the python section of the daemon config (docs/config.md, "Daemon
// config"). The worker limits are on by default (DefaultConfig: 256 MiB,
// 64 processes and threads, 1 core); a zero limit is off, which the daemon
// config says only as python.<limit>: unlimited, and Health says so.
type Config struct {
	// PythonPath names the interpreter (python.path; PYTHON_PATH overrides
	// it, see ApplyEnv). It is resolved once, at Start.
	PythonPath string
	// Replicas is the number of pre-started workers (python.replicas;
	// PYTHON_WORKER_REPLICAS overrides it). At least 1.
	Replicas int
	// DataDir is the daemon's data directory: the worker code is written to
	// <DataDir>/run/sandbox and installed packages are read from
	// <DataDir>/python-packages.
	DataDir string
	// GatewayTimeout clamps @gateway(timeout_ms=...) to [Min, Max]; Default
	// applies when an entry has no timeout_ms.
	GatewayTimeout struct{ Default, Min, Max time.Duration }
	// NodeTimeout is the timeout of Python nodes in flows (RunNode).
	NodeTimeout time.Duration
	// MemoryMax is the memory limit of one worker in bytes (0: off).
	MemoryMax int64
	// PidsMax is the limit of processes and threads of one worker (0: off).
	PidsMax int
	// CPUMax is the CPU limit of one worker in cores (0: off).
	CPUMax float64
	// RecycleAfterRuns replaces a worker after that many runs (0: never).
	RecycleAfterRuns int
	// RecycleAboveMemory replaces a worker whose resident memory is above
	// this many bytes after a run (0: never).
	RecycleAboveMemory int64
	// Queue is the number of runs that may wait for a worker; past it Run
	// fails with kind busy (at least one run always waits; queue.go says
	// how a full queue is shared between principals).
	Queue int
	// FlowWorkers is python.flow_workers: how many workers the Python
	// nodes of flows may use at once (RunNodes, RunNode), so the others stay
	// free for gateway scripts however busy the flows are. 0 means the
	// default, Replicas-1 (at least 1); at most Replicas.
	FlowWorkers int
	// IndexURL is the package index pip installs from (python.index_url,
	// a PEP 503 simple index such as https://pypi.org/simple); empty means
	// offline: wheel uploads only.
	IndexURL string
	// Hardening is python.hardening: the optional OS layers of each worker
	// (Hardening; every layer auto by default).
	Hardening Hardening
}

// DefaultPythonPath is the bundled runtime's interpreter on the appliance.
const DefaultPythonPath = "/usr/lib/qubiq/current/python/bin/python3"

// Worker limits when the config names none (docs/config.md, Daemon config: safe
// defaults; docs/limits.md): a script cannot take a small appliance, and
// the daemon with it, by allocating or starting threads without bound.
const (
	DefaultMemoryMax = 256 << 20 // bytes per worker
	DefaultPidsMax   = 64        // processes and threads per worker
	DefaultCPUMax    = 1.0       // cores per worker
)

// DefaultConfig returns the defaults of docs/config.md's daemon config: 2
// replicas, gateway timeout 10s clamped to [10ms, 10m], node timeout 60s,
// the worker limits DefaultMemoryMax, DefaultPidsMax and DefaultCPUMax,
// recycling after 1000 runs or above 192 MiB, a queue of 256, no package
// index, every hardening layer auto.
func DefaultConfig() Config {
	var c Config
	c.PythonPath = DefaultPythonPath
	c.Replicas = 2
	c.GatewayTimeout.Default = 10 * time.Second
	c.GatewayTimeout.Min = 10 * time.Millisecond
	c.GatewayTimeout.Max = 10 * time.Minute
	c.NodeTimeout = 60 * time.Second
	c.MemoryMax, c.PidsMax, c.CPUMax = DefaultMemoryMax, DefaultPidsMax, DefaultCPUMax
	c.RecycleAfterRuns = 1000
	c.RecycleAboveMemory = 192 << 20
	c.Queue = 256
	c.Hardening = DefaultHardening()
	return c
}

// ApplyEnv applies the environment overrides of docs/config.md, "Environment": PYTHON_PATH
// replaces PythonPath and PYTHON_WORKER_REPLICAS replaces Replicas. lookup is
// os.LookupEnv in the daemon. The daemon calls it after reading the YAML so
// the environment wins. The error names a variable whose value is invalid.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	if v, ok := lookup("PYTHON_PATH"); ok && v != "" {
		c.PythonPath = v
	}
	if v, ok := lookup("PYTHON_WORKER_REPLICAS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("PYTHON_WORKER_REPLICAS=%q: want a whole number of at least 1", v)
		}
		c.Replicas = n
	}
	return nil
}

// Validate reports every invalid field of c, joined.
func (c Config) Validate() error {
	var errs []error
	if c.PythonPath == "" {
		errs = append(errs, errors.New("python.path: empty"))
	}
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("python.replicas: %d, want at least 1", c.Replicas))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir: empty"))
	}
	g := c.GatewayTimeout
	if g.Min <= 0 || g.Max < g.Min || g.Default < g.Min || g.Default > g.Max {
		errs = append(errs, fmt.Errorf("python.gateway_timeout: want 0 < min (%v) <= default (%v) <= max (%v)",
			g.Min, g.Default, g.Max))
	}
	if c.NodeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("python.node_timeout: %v, want > 0", c.NodeTimeout))
	}
	if c.MemoryMax < 0 {
		errs = append(errs, fmt.Errorf("python.memory_max: %d, want >= 0", c.MemoryMax))
	}
	if c.MemoryMax > 0 && c.MemoryMax < 16<<20 {
		errs = append(errs, fmt.Errorf("python.memory_max: %d bytes is below the 16 MiB an interpreter needs", c.MemoryMax))
	}
	if c.PidsMax < 0 {
		errs = append(errs, fmt.Errorf("python.pids_max: %d, want >= 0", c.PidsMax))
	}
	if c.CPUMax < 0 {
		errs = append(errs, fmt.Errorf("python.cpu_max: %v, want >= 0", c.CPUMax))
	}
	if c.RecycleAfterRuns < 0 || c.RecycleAboveMemory < 0 {
		errs = append(errs, errors.New("python.recycle_*: want >= 0"))
	}
	if c.Queue < 0 {
		errs = append(errs, fmt.Errorf("python.queue: %d, want >= 0", c.Queue))
	}
	if c.FlowWorkers < 0 || (c.Replicas >= 1 && c.FlowWorkers > c.Replicas) {
		errs = append(errs, fmt.Errorf("python.flow_workers: %d, want 0 (the default: replicas-1) to python.replicas (%d)",
			c.FlowWorkers, c.Replicas))
	}
	if err := c.Hardening.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.IndexURL != "" {
		if u, err := url.Parse(c.IndexURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("python.index_url: %q, want an http(s) URL of a simple index", c.IndexURL))
		}
	}
	return errors.Join(errs...)
}

// flowWorkers is the flows' share of the workers: FlowWorkers, or by
// default Replicas-1 (at least 1).
func (c Config) flowWorkers() int {
	if c.FlowWorkers > 0 {
		return c.FlowWorkers
	}
	return max(c.Replicas-1, 1)
}

// clampTimeout returns the timeout of an entry whose @gateway gave ms
// milliseconds (0: absent), clamped to the config.
func (c Config) clampTimeout(ms int) time.Duration {
	g := c.GatewayTimeout
	if ms <= 0 {
		return g.Default
	}
	if int64(ms) > int64(g.Max/time.Millisecond) {
		return g.Max
	}
	d := time.Duration(ms) * time.Millisecond
	return min(max(d, g.Min), g.Max)
}

// OffLimits names the worker limits that are off (python.memory_max,
// python.pids_max, python.cpu_max set to unlimited), for health.
func (c Config) OffLimits() []string {
	var off []string
	if c.MemoryMax == 0 {
		off = append(off, "memory_max")
	}
	if c.PidsMax == 0 {
		off = append(off, "pids_max")
	}
	if c.CPUMax == 0 {
		off = append(off, "cpu_max")
	}
	return off
}
