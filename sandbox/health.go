package sandbox

import (
	"os"
	"sort"
	"strconv"

	"qubiq.dev/edge/sandbox/cgroup"
)

// Health is the sandbox part of GET /health (docs/api.md, REST): the isolation
// mode, the limits in force (null: off, python.<limit>: unlimited), the hardening
// layers, the Python runtime, the linter ("ruff" or "syntax-only") and the
// pool's counters. Reasons say what is wrong when anything is.
type Health struct {
	Mode      string          `json:"mode"`
	Limits    HealthLimits    `json:"limits"`
	Hardening HealthHardening `json:"hardening"`
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
// cores; nil when off. Memory, Pids and CPU say how each is enforced:
// "enforced" (with the mechanism in parentheses), "off (python.<limit>:
// unlimited)" (the limits are on by default, so only the config turns one
// off), or
// "unavailable: <why>" when this mode cannot enforce it at all (in rlimit
// mode pids is always unavailable: RLIMIT_NPROC counts per user and does not
// bind root). OOMDetection names how OOM kills are seen ("memory.events",
// "memory.oom_control", "exit-signal").
type HealthLimits struct {
	MemoryMax    *int64   `json:"memory_max"`
	PidsMax      *int     `json:"pids_max"`
	CPUMax       *float64 `json:"cpu_max"`
	Memory       string   `json:"memory"`
	Pids         string   `json:"pids"`
	CPU          string   `json:"cpu"`
	OOMDetection string   `json:"oom_detection,omitempty"`
}

// HealthHardening is the state of each protection of the workers beyond
// the limits: "active", "disabled" (by python.hardening), or
// "unavailable: <why>". NoNewPrivs, NetNS and Landlock follow
// python.hardening (docs/security.md, "The script sandbox"; LandlockABI is the kernel's Landlock
// ABI, 0 without one); the others are always on when they can be:
// ProcessGroup (kill of the whole process group), AuditHook (the Python
// audit hook while a script runs), CleanEnv (an environment built from
// nothing) and CloneIntoCgroup (workers start inside their cgroup v2 leaf).
// Seccomp is not part of this build.
type HealthHardening struct {
	NoNewPrivs      string `json:"no_new_privs"`
	NetNS           string `json:"netns"`
	Landlock        string `json:"landlock"`
	LandlockABI     int    `json:"landlock_abi,omitempty"`
	Seccomp         string `json:"seccomp"`
	ProcessGroup    string `json:"process_group"`
	AuditHook       string `json:"audit_hook"`
	CleanEnv        string `json:"clean_env"`
	CloneIntoCgroup string `json:"clone_into_cgroup"`
}

// HealthPython is the runtime: Status "ok", "starting" (Start is at work:
// runs wait for it), "missing" (no interpreter) or
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
		Linter: LinterSyntaxOnly,
		Python: HealthPython{Status: p.status, Version: p.pyVersion, Path: p.python, Reason: p.reason},
	}
	if p.ruff != "" {
		h.Linter = LinterRuff
	}
	if h.Python.Status == "" {
		h.Python.Status = "missing"
		h.Python.Reason = "not started"
		if p.started && !p.startReturned() {
			h.Python.Status = "starting"
			h.Python.Reason = "the workers are starting"
		}
	}
	if h.Python.Status == "ok" && p.held() {
		h.Python.Status = "starting" // the workers are up; what runs need is being installed
		h.Python.Reason = "the project's scripts are being installed"
	}
	var slotErrs []string
	for _, e := range p.slotErrs {
		slotErrs = append(slotErrs, e)
	}
	iso := p.iso
	p.mu.RUnlock()
	sort.Strings(slotErrs)

	notStarted := StateUnavailable + ": the workers are not started"
	h.Hardening = HealthHardening{NoNewPrivs: notStarted, NetNS: notStarted, Landlock: notStarted,
		Seccomp:         StateUnavailable + ": not part of this build (Landlock and the network namespace cover its main cases)",
		ProcessGroup:    StateActive,
		AuditHook:       StateActive,
		CleanEnv:        StateActive,
		CloneIntoCgroup: StateUnavailable + ": not cgroup2",
	}
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
	mode := cgroup.ModeNone
	var controllers []string
	if iso != nil {
		mode = iso.mode
		h.Mode = string(iso.mode)
		if hd := iso.harden; hd != nil {
			h.Hardening.NoNewPrivs = hd.nnp.String()
			h.Hardening.NetNS = hd.netns.String()
			h.Hardening.Landlock = hd.landlock.String()
			h.Hardening.LandlockABI = hd.landlockABI
		}
		if iso.mgr != nil {
			h.Limits.OOMDetection = iso.mgr.OOMSource()
			controllers = iso.mgr.Controllers()
			if iso.mgr.CloneIntoCgroup() {
				h.Hardening.CloneIntoCgroup = StateActive
			}
		}
		if iso.err != nil {
			h.Reasons = append(h.Reasons, "limits cannot be applied: "+iso.err.Error())
		}
		if iso.note != "" && iso.mode != cgroup.ModeCgroup2 && iso.mode != cgroup.ModeCgroup1 {
			h.Reasons = append(h.Reasons, "isolation "+string(iso.mode)+": "+iso.note)
		}
	}
	h.Limits.Memory, h.Limits.Pids, h.Limits.CPU = limitStates(mode, controllers, p.cfg, os.Geteuid() == 0)
	if mode == cgroup.ModeRlimit {
		h.Reasons = append(h.Reasons, "pids: "+h.Limits.Pids)
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

// limitStates says how each limit is enforced in mode (HealthLimits).
func limitStates(mode cgroup.Mode, controllers []string, cfg Config, root bool) (mem, pids, cpu string) {
	has := func(c string) bool {
		for _, x := range controllers {
			if x == c {
				return true
			}
		}
		return false
	}
	key := map[string]string{"memory": "memory_max", "pids": "pids_max", "cpu": "cpu_max"}
	state := func(set bool, ctrl, how string) string {
		switch {
		case !has(ctrl):
			return StateUnavailable + ": no " + ctrl + " controller in " + string(mode)
		case !set:
			return "off (python." + key[ctrl] + ": unlimited)"
		}
		return "enforced (" + how + ")"
	}
	switch mode {
	case cgroup.ModeCgroup2:
		return state(cfg.MemoryMax > 0, "memory", "memory.max, memory.swap.max=0"),
			state(cfg.PidsMax > 0, "pids", "pids.max"),
			state(cfg.CPUMax > 0, "cpu", "cpu.max")
	case cgroup.ModeCgroup1:
		return state(cfg.MemoryMax > 0, "memory", "memory.limit_in_bytes"),
			state(cfg.PidsMax > 0, "pids", "pids.max"),
			state(cfg.CPUMax > 0, "cpu", "cpu.cfs_quota_us")
	case cgroup.ModeRlimit:
		mem = "off (python.memory_max: unlimited)"
		if cfg.MemoryMax > 0 {
			mem = "enforced (RLIMIT_AS " + strconv.FormatInt(4*cfg.MemoryMax, 10) + " bytes of address space)"
		}
		pids = StateUnavailable + ": no writable pids cgroup, and RLIMIT_NPROC counts per user"
		if root {
			pids = StateUnavailable + ": no writable pids cgroup, and RLIMIT_NPROC does not bind root"
		}
		cpu = StateUnavailable + ": no writable cpu cgroup (RLIMIT_CPU is a lifetime limit)"
		return mem, pids, cpu
	}
	u := StateUnavailable + ": no cgroups and no sandbox-exec helper"
	return u, u, u
}
