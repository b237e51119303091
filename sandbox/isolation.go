package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"qubiq.dev/edge/sandbox/cgroup"
)

// isolation is how the pool confines workers: the detected mode, the cgroup
// manager, whether the sandbox-exec helper is used, and why limits cannot be
// applied when they cannot.
type isolation struct {
	mode   cgroup.Mode
	mgr    *cgroup.Manager
	helper bool
	limits cgroup.Limits
	harden *hardening
	err    error  // set limits or "on" layers that cannot be applied: every worker start fails
	note   string // why a better mode was not used
}

// setupIsolation detects the mode once (docs/security.md, "The script sandbox"). The operator
// overrides QUBIQ_SANDBOX_CGROUP_MODE (auto|cgroup2|cgroup1|rlimit) and
// QUBIQ_SANDBOX_CGROUP_PARENT (a cgroup path) are read from the daemon's
// environment.
func (p *Pool) setupIsolation(ctx context.Context) *isolation {
	iso := &isolation{
		helper: helperReady.Load() && p.selfExe != "",
		limits: cgroup.Limits{MemoryMax: p.cfg.MemoryMax, PidsMax: p.cfg.PidsMax, CPUMax: p.cfg.CPUMax},
	}
	iso.harden = p.decideHardening(ctx, iso.helper)
	mgr, err := cgroup.Detect(cgroup.Host{}, cgroup.Options{
		Mode:   os.Getenv("QUBIQ_SANDBOX_CGROUP_MODE"),
		Parent: os.Getenv("QUBIQ_SANDBOX_CGROUP_PARENT"),
	})
	if err != nil {
		iso.mode = cgroup.ModeNone
		iso.note = err.Error()
		iso.err = errors.Join(fmt.Errorf("sandbox isolation: %w", err), iso.harden.err)
		p.logger.Error("sandbox isolation failed", "err", err)
		return iso
	}
	iso.mgr = mgr
	iso.mode = mgr.Mode()
	iso.note = mgr.Reason()
	needsHelper := iso.mode == cgroup.ModeCgroup1 || iso.mode == cgroup.ModeRlimit
	if needsHelper && !iso.helper {
		if err := mgr.Close(); err != nil {
			p.logger.Warn("sandbox cgroup cleanup failed", "err", err)
		}
		iso.note = "the sandbox-exec helper is not available (the binary's main does not call sandbox.MaybeRunHelper)"
		iso.mode = cgroup.ModeNone
		iso.mgr = nil
	}
	if iso.mgr != nil {
		iso.err = iso.mgr.Applicable(iso.limits)
	} else if iso.limits != (cgroup.Limits{}) {
		iso.err = fmt.Errorf("limits are set but cannot be applied: %s", iso.note)
	}
	if iso.harden.err != nil {
		iso.err = errors.Join(iso.err, iso.harden.err)
	}
	if iso.err != nil {
		p.logger.Error("sandbox limits cannot be applied: workers will not start", "mode", iso.mode, "err", iso.err)
	} else if iso.mode != cgroup.ModeCgroup2 && iso.mode != cgroup.ModeCgroup1 {
		p.logger.Warn("sandbox isolation degraded", "mode", iso.mode, "why", iso.note)
	}
	h := iso.harden
	p.logger.Info("sandbox hardening", "no_new_privs", h.nnp.String(), "netns", h.netns.String(),
		"landlock", h.landlock.String())
	return iso
}

// slot returns the confinement of worker slot i, creating its cgroup leaf.
func (iso *isolation) slot(i int) (confined, error) {
	if iso.err != nil {
		return nil, iso.err
	}
	var base []string
	if iso.helper {
		base = append(base, "--rlimit", "core=0")
		base = append(base, iso.harden.args()...)
	}
	switch iso.mode {
	case cgroup.ModeCgroup2, cgroup.ModeCgroup1:
		s, err := iso.mgr.NewSlot("w"+strconv.Itoa(i), iso.limits)
		if err != nil {
			return nil, err
		}
		c := &cgroupConf{slot: s, fd: -1}
		if iso.mode == cgroup.ModeCgroup2 && iso.mgr.CloneIntoCgroup() {
			c.fd = s.FD()
		} else {
			for _, f := range s.ProcsFiles() {
				base = append(base, "--join", f)
			}
		}
		c.args = base
		return c, nil
	case cgroup.ModeRlimit:
		args := base
		if iso.limits.MemoryMax > 0 {
			// RLIMIT_AS limits address space, not resident memory: 4x the
			// budget leaves room for arenas and thread stacks (docs/security.md, "The script sandbox").
			args = append(args, "--rlimit", "as="+strconv.FormatInt(4*iso.limits.MemoryMax, 10))
		}
		return &rlimitConf{args: args}, nil
	}
	if base != nil {
		return &rlimitConf{args: base}, nil
	}
	return nil, nil
}

func (iso *isolation) close() error {
	if iso == nil || iso.mgr == nil {
		return nil
	}
	return iso.mgr.Close()
}

// cgroupConf confines a worker to a cgroup slot.
type cgroupConf struct {
	slot *cgroup.Slot
	fd   int
	args []string
}

func (c *cgroupConf) helperArgs() []string { return c.args }
func (c *cgroupConf) cgroupFD() int        { return c.fd }
func (c *cgroupConf) killAll() error       { return c.slot.Kill() }
func (c *cgroupConf) oomKills() (uint64, bool) {
	return c.slot.OOMKills()
}

// rlimitConf confines a worker with rlimits set by the helper.
type rlimitConf struct{ args []string }

func (c *rlimitConf) helperArgs() []string     { return c.args }
func (c *rlimitConf) cgroupFD() int            { return -1 }
func (c *rlimitConf) killAll() error           { return nil }
func (c *rlimitConf) oomKills() (uint64, bool) { return 0, false }
