package sandbox

import (
	"context"
	"fmt"
)

// Settings is GET /sandbox/config: how the sandbox is configured and what
// is in force. Python is the runtime's state (as in Health), PythonPath
// the configured interpreter, Pip pip's version line or why there is none;
// the limits and timeouts as configured (0: unset); Hardening as
// configured (auto|on|off) and its state (Health); the package index
// (empty: offline) and the packages directory; Allowed the built-in import
// allow-list, Installed the installed packages' import names; the linter
// and where it was found.
type Settings struct {
	Python             HealthPython    `json:"python"`
	PythonPath         string          `json:"python_path"`
	Pip                string          `json:"pip"`
	Mode               string          `json:"mode"`
	Replicas           int             `json:"replicas"`
	Queue              int             `json:"queue"`
	GatewayTimeoutMs   [3]int64        `json:"gateway_timeout_ms"` // default, min, max
	NodeTimeoutMs      int64           `json:"node_timeout_ms"`
	MemoryMax          int64           `json:"memory_max"`
	PidsMax            int             `json:"pids_max"`
	CPUMax             float64         `json:"cpu_max"`
	RecycleAfterRuns   int             `json:"recycle_after_runs"`
	RecycleAboveMemory int64           `json:"recycle_above_memory"`
	HardeningConfig    Hardening       `json:"hardening_config"`
	Hardening          HealthHardening `json:"hardening"`
	IndexURL           string          `json:"index_url"`
	PackagesDir        string          `json:"packages_dir"`
	Allowed            []string        `json:"allowed"`
	Installed          []string        `json:"installed"`
	Linter             string          `json:"linter"`
	LinterPath         string          `json:"linter_path,omitempty"`
}

// Settings returns the sandbox's settings; it asks the runtime for pip's
// version (bounded by ctx and a few seconds).
func (p *Pool) Settings(ctx context.Context) Settings {
	h := p.Health()
	_, installed := p.pkgs.Current()
	p.mu.RLock()
	s := Settings{
		Python: h.Python, PythonPath: p.cfg.PythonPath, Mode: h.Mode, Replicas: p.cfg.Replicas, Queue: p.cfg.Queue,
		GatewayTimeoutMs: [3]int64{p.cfg.GatewayTimeout.Default.Milliseconds(), p.cfg.GatewayTimeout.Min.Milliseconds(),
			p.cfg.GatewayTimeout.Max.Milliseconds()},
		NodeTimeoutMs: p.cfg.NodeTimeout.Milliseconds(), MemoryMax: p.cfg.MemoryMax, PidsMax: p.cfg.PidsMax,
		CPUMax: p.cfg.CPUMax, RecycleAfterRuns: p.cfg.RecycleAfterRuns, RecycleAboveMemory: p.cfg.RecycleAboveMemory,
		HardeningConfig: p.cfg.Hardening, Hardening: h.Hardening, IndexURL: p.cfg.IndexURL, PackagesDir: p.pkgs.Dir(),
		Allowed: append([]string{}, p.allowed...), Installed: installed,
		Linter: h.Linter, LinterPath: p.ruff,
	}
	p.mu.RUnlock()
	s.Pip = p.pkgs.PipVersion(ctx, p.homeDir)
	return s
}

// MarshalJSON encodes h with the keys of python.hardening
// ({"no_new_privs","netns","landlock"}, each auto, on or off).
func (h Hardening) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"no_new_privs":%q,"netns":%q,"landlock":%q}`,
		hardenMode(h.NoNewPrivs), hardenMode(h.NetNS), hardenMode(h.Landlock))), nil
}
