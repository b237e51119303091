package sandbox

import (
	"sort"

	"qubiq.dev/edge/sandbox/cgroup"
)

// Health is the sandbox part of GET /health (DESIGN.md, REST): the isolation
// mode, the limits in force (null: unset, not applied), the hardening steps,
// the Python runtime, the linter and the pool's counters. Reasons say what is
// wrong when anything is.
type Health struct {
	Mode      string          `json:"mode"`
	Limits    HealthLimits    `json:"limits"`
	Hardening map[string]bool `json:"hardening"`
	Python    HealthPython    `json:"python"`
	Linter    string          `json:"linter"`
	Workers   int             `json:"workers"`
	Busy      int             `json:"busy"`
	Queued    int             `json:"queued"`
	Timeouts  uint64          `json:"timeouts"`
	OOMs      uint64          `json:"ooms"`
	Reasons   []string        `json:"reasons,omitempty"`
}

// HealthLimits are the per-worker limits: memory in bytes, pids, CPU in
// cores; nil when unset. OOMDetection names how OOM kills are seen
// ("memory.events", "memory.oom_control", "exit-signal").
type HealthLimits struct {
	MemoryMax    *int64   `json:"memory_max"`
	PidsMax      *int     `json:"pids_max"`
	CPUMax       *float64 `json:"cpu_max"`
	OOMDetection string   `json:"oom_detection,omitempty"`
}

// HealthPython is the runtime: Status "ok", "missing" (no interpreter) or
// "failed" (it did not pass its handshake, or workers cannot start), the
// version, the resolved path and, when not ok, the reason.
type HealthPython struct {
	Status  string `json:"status"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Health returns the sandbox's state now.
func (p *Pool) Health() Health {
	p.mu.RLock()
	h := Health{
		Mode:   string(cgroup.ModeNone),
		Linter: "syntax-only",
		Python: HealthPython{Status: p.status, Version: p.pyVersion, Path: p.python, Reason: p.reason},
		Hardening: map[string]bool{
			"process_group": true,
			"audit_hook":    true,
			"clean_env":     true,
			"netns":         false,
			"landlock":      false,
			"seccomp":       false,
		},
	}
	if h.Python.Status == "" {
		h.Python.Status = "missing"
		h.Python.Reason = "not started"
	}
	var slotErrs []string
	for _, e := range p.slotErrs {
		slotErrs = append(slotErrs, e)
	}
	iso := p.iso
	p.mu.RUnlock()
	sort.Strings(slotErrs)

	if p.cfg.MemoryMax > 0 {
		v := p.cfg.MemoryMax
		h.Limits.MemoryMax = &v
	}
	if p.cfg.PidsMax > 0 {
		v := p.cfg.PidsMax
		h.Limits.PidsMax = &v
	}
	if p.cfg.CPUMax > 0 {
		v := p.cfg.CPUMax
		h.Limits.CPUMax = &v
	}
	if iso != nil {
		h.Mode = string(iso.mode)
		h.Hardening["no_new_privs"] = iso.helper
		if iso.mgr != nil {
			h.Limits.OOMDetection = iso.mgr.OOMSource()
			h.Hardening["clone_into_cgroup"] = iso.mgr.CloneIntoCgroup()
		}
		if iso.err != nil {
			h.Reasons = append(h.Reasons, "limits cannot be applied: "+iso.err.Error())
		}
		if iso.note != "" && iso.mode != cgroup.ModeCgroup2 && iso.mode != cgroup.ModeCgroup1 {
			h.Reasons = append(h.Reasons, "isolation "+string(iso.mode)+": "+iso.note)
		}
	}
	if h.Python.Status != "ok" && h.Python.Reason != "" {
		h.Reasons = append(h.Reasons, "python "+h.Python.Status+": "+h.Python.Reason)
	}
	h.Reasons = append(h.Reasons, slotErrs...)
	h.Workers = int(p.live.Load())
	h.Busy = int(p.busy.Load())
	h.Queued = int(max(p.queued.Load(), 0))
	h.Timeouts = p.timeouts.Load()
	h.OOMs = p.ooms.Load()
	return h
}
