package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is the isolation mode: "cgroup2", "cgroup1", "rlimit" or "none".
type Mode string

// The modes, best first.
const (
	ModeCgroup2 Mode = "cgroup2"
	ModeCgroup1 Mode = "cgroup1"
	ModeRlimit  Mode = "rlimit"
	ModeNone    Mode = "none"
)

// Limits of one worker slot. Zero fields are unset and not written.
type Limits struct {
	MemoryMax int64   // bytes
	PidsMax   int     // processes and threads
	CPUMax    float64 // cores
}

// Host says where to look. Zero fields mean the running system: Root "" (the
// paths of mountinfo as they are), /proc/self/cgroup, /proc/self/mountinfo,
// os.Getpid(). Tests point Root at a fake tree.
type Host struct {
	Root      string
	CgroupMap string // path of a /proc/self/cgroup file
	MountInfo string // path of a /proc/self/mountinfo file
	PID       int
}

// Options of Detect. Mode is "auto" (or ""), "cgroup2", "cgroup1" or
// "rlimit" (QUBIQ_SANDBOX_CGROUP_MODE); Parent, when set, is the parent
// cgroup path relative to each hierarchy's root instead of the daemon's own
// cgroup (QUBIQ_SANDBOX_CGROUP_PARENT); Name names the group this Manager
// creates under the parent (one per pool).
type Options struct {
	Mode   string
	Parent string
	Name   string
}

// Manager is one group of worker slots in the detected mode.
type Manager struct {
	mode        Mode
	reason      string   // why a better mode was not chosen
	controllers []string // controllers available to the slots
	group       string   // cgroup2: the group dir; unused in v1
	v1          map[string]string
	oom         string // "memory.events", "memory.oom_control" or "exit-signal"
	clone       bool   // cgroup2: CLONE_INTO_CGROUP
	stale       int    // groups of dead daemons removed by Detect

	mu    sync.Mutex
	slots []*Slot
}

var seq atomic.Int64

// GroupName returns a name for a new group of this process:
// qubiq-sandbox-<pid>-<n>.
func GroupName() string {
	return fmt.Sprintf("qubiq-sandbox-%d-%d", os.Getpid(), seq.Add(1))
}

// Detect chooses the best mode that works on this host (cgroup2, cgroup1, rlimit),
// creates the group directory for it and returns its Manager. It falls back
// to ModeRlimit, with Reason saying why, rather than fail; it returns an
// error only for invalid options or a forced mode that does not work.
func Detect(h Host, opt Options) (*Manager, error) {
	h = h.defaults()
	if opt.Name == "" {
		opt.Name = GroupName()
	}
	if strings.ContainsAny(opt.Name, "/\x00") || opt.Name == "." || opt.Name == ".." {
		return nil, fmt.Errorf("cgroup: invalid group name %q", opt.Name)
	}
	want := opt.Mode
	if want == "" {
		want = "auto"
	}
	switch want {
	case "auto", "cgroup2", "cgroup1", "rlimit":
	default:
		return nil, fmt.Errorf("cgroup: unknown mode %q (want auto, cgroup2, cgroup1 or rlimit)", opt.Mode)
	}
	if want == "rlimit" {
		return &Manager{mode: ModeRlimit, reason: "forced by configuration", oom: "exit-signal"}, nil
	}
	mi, err1 := os.ReadFile(h.MountInfo)
	cm, err2 := os.ReadFile(h.CgroupMap)
	if err := errors.Join(err1, err2); err != nil {
		if want != "auto" {
			return nil, fmt.Errorf("cgroup: %s forced: %w", want, err)
		}
		return &Manager{mode: ModeRlimit, reason: err.Error(), oom: "exit-signal"}, nil
	}
	mounts := parseMountInfo(mi)
	paths := parseCgroupMap(cm)
	var reasons []string
	if want == "auto" || want == "cgroup2" {
		m, err := detectV2(h, opt, mounts, paths)
		if err == nil {
			return m, nil
		}
		if want == "cgroup2" {
			return nil, err
		}
		reasons = append(reasons, err.Error())
	}
	m, err := detectV1(h, opt, mounts, paths)
	if err == nil {
		m.reason = strings.Join(reasons, "; ")
		return m, nil
	}
	if want == "cgroup1" {
		return nil, err
	}
	reasons = append(reasons, err.Error())
	return &Manager{mode: ModeRlimit, reason: strings.Join(reasons, "; "), oom: "exit-signal"}, nil
}

func detectV2(h Host, opt Options, mounts []mount, paths map[string]string) (*Manager, error) {
	var mnt *mount
	for i := range mounts {
		if mounts[i].v2 {
			mnt = &mounts[i]
			break
		}
	}
	if mnt == nil {
		return nil, errors.New("cgroup2: not mounted")
	}
	own, ok := paths[""]
	if !ok {
		return nil, errors.New("cgroup2: /proc/self/cgroup has no 0:: line")
	}
	base := dirOf(h, *mnt, own)
	if opt.Parent != "" {
		base = dirOf(h, *mnt, opt.Parent)
	}
	ctrl, err := readWords(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup2: %w", err)
	}
	if !slices.Contains(ctrl, "memory") || !slices.Contains(ctrl, "pids") {
		return nil, fmt.Errorf("cgroup2: %s offers %q, not memory and pids", base, ctrl)
	}
	if opt.Parent == "" {
		// No internal processes: the daemon leaves its cgroup for a
		// supervisor leaf before it enables controllers there.
		if filepath.Base(base) == "supervisor" {
			base = filepath.Dir(base)
		} else {
			sup := filepath.Join(base, "supervisor")
			if err := os.Mkdir(sup, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("cgroup2: create %s: %w", sup, err)
			}
			if err := writeFile(filepath.Join(sup, "cgroup.procs"), strconv.Itoa(h.PID)); err != nil {
				return nil, fmt.Errorf("cgroup2: move the daemon to %s: %w", sup, err)
			}
		}
	}
	want := []string{"memory", "pids"}
	if slices.Contains(ctrl, "cpu") {
		want = append(want, "cpu")
	}
	if err := enable(base, want); err != nil {
		return nil, err
	}
	stale := removeStale(base)
	group := filepath.Join(base, opt.Name)
	if err := os.Mkdir(group, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup2: create %s: %w", group, err)
	}
	if err := enable(group, want); err != nil {
		_ = os.Remove(group) // best effort: it is empty
		return nil, err
	}
	return &Manager{mode: ModeCgroup2, controllers: want, group: group, oom: "memory.events", clone: true,
		stale: stale}, nil
}

func enable(dir string, ctrl []string) error {
	var b strings.Builder
	for i, c := range ctrl {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("+" + c)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), b.String()); err != nil {
		return fmt.Errorf("cgroup2: enable %s in %s: %w", b.String(), dir, err)
	}
	return nil
}

func detectV1(h Host, opt Options, mounts []mount, paths map[string]string) (*Manager, error) {
	dirs := map[string]string{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		for _, m := range mounts {
			if m.v2 || !slices.Contains(m.controllers, c) {
				continue
			}
			p := paths[c]
			if opt.Parent != "" {
				p = opt.Parent
			}
			if p == "" {
				continue
			}
			dirs[c] = filepath.Join(dirOf(h, m, p), opt.Name)
			break
		}
	}
	for _, c := range []string{"memory", "pids"} {
		if dirs[c] == "" {
			return nil, fmt.Errorf("cgroup1: no %s hierarchy", c)
		}
	}
	m := &Manager{mode: ModeCgroup1, v1: map[string]string{}, oom: "memory.oom_control"}
	for _, c := range []string{"memory", "pids", "cpu"} {
		d := dirs[c]
		if d == "" {
			continue
		}
		m.stale += removeStale(filepath.Dir(d))
		if err := os.Mkdir(d, 0o755); err != nil {
			if c == "cpu" {
				continue // optional
			}
			_ = m.Close() // best effort: remove what was made
			return nil, fmt.Errorf("cgroup1: create %s: %w", d, err)
		}
		m.v1[c] = d
		m.controllers = append(m.controllers, c)
	}
	return m, nil
}

// groupPrefix begins the name of every group GroupName makes.
const groupPrefix = "qubiq-sandbox-"

// removeStale removes the groups under parent that GroupName made for
// processes that are gone (a daemon that crashed or was killed), killing
// what is left in them first: a worker stuck in a loop outlives the daemon
// that started it. Groups of live processes are left alone. It returns how
// many groups it removed.
func removeStale(parent string) int {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), groupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		group := filepath.Join(parent, e.Name())
		leaves, _ := os.ReadDir(group)
		for _, l := range leaves {
			if !l.IsDir() {
				continue
			}
			s := &Slot{name: l.Name(), dirs: map[string]string{"leaf": filepath.Join(group, l.Name())}, fd: -1}
			_ = s.Kill() // best effort: rmdir below fails if anything is left
			_ = rmdirRetry(filepath.Join(group, l.Name()))
		}
		if rmdirRetry(group) == nil {
			n++
		}
	}
	return n
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Stale returns how many groups of dead daemons Detect removed.
func (m *Manager) Stale() int { return m.stale }

// Mode returns the detected mode.
func (m *Manager) Mode() Mode { return m.mode }

// Reason says why a better mode was not chosen ("" when none was possible
// to prefer).
func (m *Manager) Reason() string { return m.reason }

// Controllers returns the controllers the slots have ("memory", "pids",
// "cpu").
func (m *Manager) Controllers() []string { return slices.Clone(m.controllers) }

// OOMSource names how OOM kills are counted: "memory.events" (v2),
// "memory.oom_control" (v1) or "exit-signal".
func (m *Manager) OOMSource() string { return m.oom }

// CloneIntoCgroup reports whether workers start straight in their leaf.
func (m *Manager) CloneIntoCgroup() bool { return m.clone }

// Path returns the group directory (the memory one in v1), "" without cgroups.
func (m *Manager) Path() string {
	if m.mode == ModeCgroup2 {
		return m.group
	}
	return m.v1["memory"]
}

// Applicable returns an error naming each limit of l that this mode cannot
// apply; a limit that is set and cannot be applied fails the worker's start
// (README: the script sandbox; limits that are on by default fail closed).
// In rlimit mode memory is applied as
// RLIMIT_AS by the helper; pids and cpu cannot be.
func (m *Manager) Applicable(l Limits) error {
	var errs []error
	has := func(c string) bool { return slices.Contains(m.controllers, c) }
	switch m.mode {
	case ModeCgroup2, ModeCgroup1:
		if l.MemoryMax > 0 && !has("memory") {
			errs = append(errs, errors.New("python.memory_max is set but the memory controller is not available"))
		}
		if l.PidsMax > 0 && !has("pids") {
			errs = append(errs, errors.New("python.pids_max is set but the pids controller is not available"))
		}
		if l.CPUMax > 0 && !has("cpu") {
			errs = append(errs, fmt.Errorf("python.cpu_max is set but the cpu controller is not available (%s)", m.mode))
		}
	case ModeRlimit:
		if l.PidsMax > 0 {
			errs = append(errs, errors.New("python.pids_max is set but no pids cgroup is writable "+
				"(RLIMIT_NPROC counts per user and does not bind root)"))
		}
		if l.CPUMax > 0 {
			errs = append(errs, errors.New("python.cpu_max is set but no cpu cgroup is writable "+
				"(RLIMIT_CPU is a lifetime limit)"))
		}
	default:
		if l.MemoryMax > 0 || l.PidsMax > 0 || l.CPUMax > 0 {
			errs = append(errs, errors.New("limits are set but neither cgroups nor the sandbox helper are available"))
		}
	}
	return errors.Join(errs...)
}

// Close removes every slot and the group directories.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, s := range m.slots {
		if err := s.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	m.slots = nil
	if m.group != "" {
		if err := rmdirRetry(m.group); err != nil {
			errs = append(errs, err)
		}
		m.group = ""
	}
	for c, d := range m.v1 {
		if err := rmdirRetry(d); err != nil {
			errs = append(errs, err)
		}
		delete(m.v1, c)
	}
	return errors.Join(errs...)
}

// rmdirRetry removes an empty cgroup directory; rmdir returns EBUSY for a
// few milliseconds after the last process left (kernel Documentation/
// admin-guide/cgroup-v2.rst: a cgroup is removable once it has no live
// processes, which the kernel notices a little after the last exit).
func rmdirRetry(d string) error {
	var err error
	for wait := time.Millisecond; wait < 2*time.Second; wait *= 2 {
		err = unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(wait)
	}
	return fmt.Errorf("cgroup: remove %s: %w", d, err)
}

func readWords(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// Test hooks: onWrite sees (and may fail) every write; createFiles lets
// writes create files in fake trees, where mkdir makes no interface files.
var (
	onWrite     func(path, value string) error
	createFiles bool
)

// writeFile writes v to a cgroup file, which must exist (cgroupfs files are
// never created by writing).
func writeFile(path, v string) error {
	if onWrite != nil {
		if err := onWrite(path, v); err != nil {
			return fmt.Errorf("cgroup: write %q to %s: %w", v, path, err)
		}
	}
	flags := os.O_WRONLY | os.O_TRUNC
	if createFiles {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("cgroup: write %s: %w", path, err)
	}
	_, werr := f.WriteString(v)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", v, path, err)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
