package daemon

import (
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/sandbox"
)

// sandboxConfig is the workers' configuration from the daemon config's
// python section: each value the config sets replaces the sandbox's
// default (sandbox.DefaultConfig); the limits are the config's own, whose
// absence the config has already turned into the defaults.
func sandboxConfig(c *config.Daemon) sandbox.Config {
	py := c.Python
	cfg := sandbox.DefaultConfig()
	cfg.PythonPath = py.Path
	cfg.Replicas = py.Replicas
	cfg.DataDir = c.DataDir
	if py.GatewayTimeout.Default > 0 {
		cfg.GatewayTimeout.Default = py.GatewayTimeout.Default.D()
	}
	if py.GatewayTimeout.Min > 0 {
		cfg.GatewayTimeout.Min = py.GatewayTimeout.Min.D()
	}
	if py.GatewayTimeout.Max > 0 {
		cfg.GatewayTimeout.Max = py.GatewayTimeout.Max.D()
	}
	if py.NodeTimeout > 0 {
		cfg.NodeTimeout = py.NodeTimeout.D()
	}
	cfg.MemoryMax = int64(py.MemoryMax)
	cfg.PidsMax = py.PidsMax
	cfg.CPUMax = py.CPUMax
	if py.RecycleAfterRuns > 0 {
		cfg.RecycleAfterRuns = py.RecycleAfterRuns
	}
	if py.RecycleAboveMemory > 0 {
		cfg.RecycleAboveMemory = int64(py.RecycleAboveMemory)
	}
	if py.Queue > 0 {
		cfg.Queue = py.Queue
	}
	cfg.IndexURL, cfg.Hardening = py.IndexURL, sandbox.HardeningFrom(py.Hardening) // python.index_url, python.hardening
	return cfg
}
