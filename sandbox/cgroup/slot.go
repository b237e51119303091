package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Slot is the cgroup leaf (or leaves, in v1) of one worker slot.
// Its methods are safe for concurrent use.
type Slot struct {
	m     *Manager
	name  string
	limit Limits

	mu   sync.Mutex
	dirs map[string]string // controller ("memory", "pids", "cpu", or "unified") → leaf dir
	fd   int               // cgroup2 leaf directory fd, -1 otherwise
}

// leaves returns a copy of the slot's directories.
func (s *Slot) leaves() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.dirs))
	for k, v := range s.dirs {
		out[k] = v
	}
	return out
}

// NewSlot creates (or reuses) the leaf named name and writes the limits. It
// fails when a set limit cannot be applied; the leaf is then removed.
func (m *Manager) NewSlot(name string, l Limits) (*Slot, error) {
	if err := m.Applicable(l); err != nil {
		return nil, err
	}
	s := &Slot{m: m, name: name, dirs: map[string]string{}, fd: -1, limit: l}
	if m.mode != ModeCgroup2 && m.mode != ModeCgroup1 {
		return s, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, existing := range m.slots {
		if existing.name == name {
			return existing, nil
		}
	}
	if err := s.create(); err != nil {
		_ = s.Remove() // best effort; the error below says what failed
		return nil, err
	}
	m.slots = append(m.slots, s)
	return s, nil
}

func (s *Slot) create() error {
	m, l := s.m, s.limit
	if m.mode == ModeCgroup2 {
		d := filepath.Join(m.group, s.name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup2: create %s: %w", d, err)
		}
		s.dirs["unified"] = d
		if l.MemoryMax > 0 {
			if err := writeFile(filepath.Join(d, "memory.max"), strconv.FormatInt(l.MemoryMax, 10)); err != nil {
				return err
			}
			if exists(filepath.Join(d, "memory.swap.max")) {
				if err := writeFile(filepath.Join(d, "memory.swap.max"), "0"); err != nil {
					return err
				}
			}
		}
		if exists(filepath.Join(d, "memory.oom.group")) {
			if err := writeFile(filepath.Join(d, "memory.oom.group"), "1"); err != nil {
				return err
			}
		}
		if l.PidsMax > 0 {
			if err := writeFile(filepath.Join(d, "pids.max"), strconv.Itoa(l.PidsMax)); err != nil {
				return err
			}
		}
		if l.CPUMax > 0 {
			q := int64(math.Round(l.CPUMax * 100000))
			if err := writeFile(filepath.Join(d, "cpu.max"), fmt.Sprintf("%d 100000", max(q, 1000))); err != nil {
				return err
			}
		}
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cgroup2: open %s: %w", d, err)
		}
		s.fd = fd
		return nil
	}
	for c, g := range m.v1 {
		d := filepath.Join(g, s.name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup1: create %s: %w", d, err)
		}
		s.dirs[c] = d
	}
	if d := s.dirs["memory"]; d != "" && l.MemoryMax > 0 {
		v := strconv.FormatInt(l.MemoryMax, 10)
		if err := writeFile(filepath.Join(d, "memory.limit_in_bytes"), v); err != nil {
			return err
		}
		// memsw (memory + swap) exists only with swap accounting and must be
		// written after the memory limit (it may not be below it).
		if exists(filepath.Join(d, "memory.memsw.limit_in_bytes")) {
			if err := writeFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), v); err != nil {
				return err
			}
		}
	}
	if d := s.dirs["pids"]; d != "" && l.PidsMax > 0 {
		if err := writeFile(filepath.Join(d, "pids.max"), strconv.Itoa(l.PidsMax)); err != nil {
			return err
		}
	}
	if l.CPUMax > 0 {
		d := s.dirs["cpu"]
		if err := writeFile(filepath.Join(d, "cpu.cfs_period_us"), "100000"); err != nil {
			return err
		}
		q := int64(math.Round(l.CPUMax * 100000))
		if err := writeFile(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(max(q, 1000), 10)); err != nil {
			return err
		}
	}
	return nil
}

// FD returns the cgroup2 leaf directory fd for SysProcAttr.CgroupFD, or -1.
func (s *Slot) FD() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd
}

// ProcsFiles returns the cgroup.procs files a process writes its pid to in
// order to join the slot (cgroup1: one per controller; cgroup2 without
// CLONE_INTO_CGROUP: the leaf's). The sandbox helper does this before it
// executes Python.
func (s *Slot) ProcsFiles() []string {
	dirs := s.leaves()
	var out []string
	for _, c := range []string{"unified", "memory", "pids", "cpu", "leaf"} {
		if d := dirs[c]; d != "" {
			out = append(out, filepath.Join(d, "cgroup.procs"))
		}
	}
	return out
}

// Limits returns the limits written to the slot.
func (s *Slot) Limits() Limits { return s.limit }

// procs returns the pids in the slot.
func (s *Slot) procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, f := range s.ProcsFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, w := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(w); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// Kill SIGKILLs every process in the slot: cgroup.kill in cgroup2 (Linux ≥
// 5.14), else each pid listed, repeated until none is left or a second
// passed. A slot without cgroups has nothing to kill.
func (s *Slot) Kill() error {
	dirs := s.leaves()
	if len(dirs) == 0 {
		return nil
	}
	if d := dirs["unified"]; d != "" && exists(filepath.Join(d, "cgroup.kill")) {
		if err := writeFile(filepath.Join(d, "cgroup.kill"), "1"); err == nil {
			return nil
		}
	}
	deadline := time.Now().Add(time.Second)
	for {
		pids := s.procs()
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: already gone
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %d processes left in slot %s", len(pids), s.name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Empty reports whether no process is left in the slot.
func (s *Slot) Empty() bool { return len(s.procs()) == 0 }

// OOMKills returns the slot's OOM kill counter (oom_kill of memory.events in
// cgroup2, of memory.oom_control in cgroup1), and false when the mode has
// none. An increase across a run means the kernel OOM-killed inside the slot.
func (s *Slot) OOMKills() (uint64, bool) {
	dirs := s.leaves()
	var f string
	switch {
	case dirs["unified"] != "":
		f = filepath.Join(dirs["unified"], "memory.events")
	case dirs["memory"] != "":
		f = filepath.Join(dirs["memory"], "memory.oom_control")
	default:
		return 0, false
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == "oom_kill" {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Remove kills what is left in the slot and removes its leaves, retrying
// rmdir while the kernel still reports them busy.
func (s *Slot) Remove() error {
	s.mu.Lock()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	s.mu.Unlock()
	dirs := s.leaves()
	if len(dirs) == 0 {
		return nil
	}
	var errs []error
	if err := s.Kill(); err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if err := rmdirRetry(d); err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	s.dirs = map[string]string{}
	s.mu.Unlock()
	return errors.Join(errs...)
}
