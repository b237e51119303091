package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeHost builds a fake /proc/self/{mountinfo,cgroup} and cgroup tree under
// a temp dir. files maps paths (relative to the root) to contents; a path
// ending in "/" is a directory.
func fakeHost(t *testing.T, mountinfo, cgroupMap string, files map[string]string) Host {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mi := filepath.Join(root, "mountinfo")
	cg := filepath.Join(root, "cgroup")
	if err := os.WriteFile(mi, []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cg, []byte(cgroupMap), 0o644); err != nil {
		t.Fatal(err)
	}
	return Host{Root: root, MountInfo: mi, CgroupMap: cg, PID: 4242}
}

// recordWrites makes writes create files and records them in order; fail
// maps a path suffix to the error its write returns.
func recordWrites(t *testing.T, fail map[string]error) *[]string {
	t.Helper()
	var mu sync.Mutex
	var writes []string
	createFiles = true
	onWrite = func(path, v string) error {
		mu.Lock()
		defer mu.Unlock()
		for suffix, err := range fail {
			if strings.HasSuffix(path, suffix) {
				return err
			}
		}
		writes = append(writes, path+"="+v)
		return nil
	}
	t.Cleanup(func() { createFiles = false; onWrite = nil })
	return &writes
}

// The dev VM's shape (docs/security.md, "The script sandbox"): v1 memory/pids/cpu, the memory
// cgroup below the root, and a cgroup2 mount that offers hugetlb only.
const devVMMountInfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const devVMCgroup = `9:name=systemd:/
8:pids:/
4:memory:/process_api/abc
1:cpu:/
0::/
`

func devVMFiles() map[string]string {
	return map[string]string{
		"sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n",
		"sys/fs/cgroup/memory/process_api/abc/":    "",
		"sys/fs/cgroup/pids/":                      "",
		"sys/fs/cgroup/cpu/":                       "",
	}
}

func TestDetect_HybridDevVM_ChoosesCgroup1(t *testing.T) {
	h := fakeHost(t, devVMMountInfo, devVMCgroup, devVMFiles())
	m, err := Detect(h, Options{Name: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != ModeCgroup1 {
		t.Fatalf("mode %s, want cgroup1 (reason %q)", m.Mode(), m.Reason())
	}
	if !strings.Contains(m.Reason(), "hugetlb") {
		t.Errorf("reason %q should say the cgroup2 mount offers hugetlb only", m.Reason())
	}
	want := map[string]string{
		"memory": filepath.Join(h.Root, "sys/fs/cgroup/memory/process_api/abc/g1"),
		"pids":   filepath.Join(h.Root, "sys/fs/cgroup/pids/g1"),
		"cpu":    filepath.Join(h.Root, "sys/fs/cgroup/cpu/g1"),
	}
	for c, d := range want {
		if m.v1[c] != d {
			t.Errorf("%s group %q, want %q", c, m.v1[c], d)
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s group not created: %v", c, err)
		}
	}
	if m.OOMSource() != "memory.oom_control" || m.CloneIntoCgroup() {
		t.Errorf("oom %s clone %v", m.OOMSource(), m.CloneIntoCgroup())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", d, err)
		}
	}
}

func TestManager_NewSlot_Cgroup1_WritesLimitsInOrder(t *testing.T) {
	h := fakeHost(t, devVMMountInfo, devVMCgroup, devVMFiles())
	m, err := Detect(h, Options{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Swap accounting present: the memsw file exists in the leaf.
	memLeaf := filepath.Join(m.v1["memory"], "w0")
	if err := os.MkdirAll(memLeaf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(memLeaf, "memory.memsw.limit_in_bytes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writes := recordWrites(t, nil)
	s, err := m.NewSlot("w0", Limits{MemoryMax: 64 << 20, PidsMax: 8, CPUMax: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string { return strings.TrimPrefix(p, h.Root+"/sys/fs/cgroup/") }
	var got []string
	for _, w := range *writes {
		got = append(got, rel(w))
	}
	mem := slices.Index(got, "memory/process_api/abc/g/w0/memory.limit_in_bytes=67108864")
	memsw := slices.Index(got, "memory/process_api/abc/g/w0/memory.memsw.limit_in_bytes=67108864")
	if mem < 0 || memsw < 0 || memsw < mem {
		t.Errorf("writes %v: want memory.limit_in_bytes before memory.memsw.limit_in_bytes", got)
	}
	for _, w := range []string{"pids/g/w0/pids.max=8", "cpu/g/w0/cpu.cfs_period_us=100000", "cpu/g/w0/cpu.cfs_quota_us=50000"} {
		if !slices.Contains(got, w) {
			t.Errorf("writes %v: missing %s", got, w)
		}
	}
	if s.FD() != -1 || len(s.ProcsFiles()) != 3 {
		t.Errorf("fd %d procs %v", s.FD(), s.ProcsFiles())
	}
}

const v2MountInfo = `30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate
`

func v2Files(svc string) map[string]string {
	return map[string]string{
		"sys/fs/cgroup" + svc + "/cgroup.controllers": "cpuset cpu io memory pids\n",
	}
}

func TestDetect_Cgroup2Delegated_MovesItselfBeforeEnabling(t *testing.T) {
	svc := "/system.slice/qubiqd.service"
	h := fakeHost(t, v2MountInfo, "0::"+svc+"\n", v2Files(svc))
	writes := recordWrites(t, nil)
	m, err := Detect(h, Options{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != ModeCgroup2 || !m.CloneIntoCgroup() || m.OOMSource() != "memory.events" {
		t.Fatalf("mode %s clone %v oom %s", m.Mode(), m.CloneIntoCgroup(), m.OOMSource())
	}
	base := h.Root + "/sys/fs/cgroup" + svc
	want := []string{
		base + "/supervisor/cgroup.procs=4242",
		base + "/cgroup.subtree_control=+memory +pids +cpu",
		base + "/g/cgroup.subtree_control=+memory +pids +cpu",
	}
	if !slices.Equal(*writes, want) {
		t.Errorf("writes\n%v\nwant (supervisor move first)\n%v", *writes, want)
	}
	*writes = nil
	if _, err := m.NewSlot("w1", Limits{MemoryMax: 256 << 20, PidsMax: 64, CPUMax: 1}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{base + "/g/w1/memory.max=268435456", base + "/g/w1/pids.max=64", base + "/g/w1/cpu.max=100000 100000"} {
		if !slices.Contains(*writes, w) {
			t.Errorf("writes %v: missing %s", *writes, w)
		}
	}
}

func TestDetect_Cgroup2_AlreadyInSupervisor_NoMove(t *testing.T) {
	svc := "/system.slice/qubiqd.service"
	files := v2Files(svc + "/supervisor")
	files["sys/fs/cgroup"+svc+"/"] = ""
	h := fakeHost(t, v2MountInfo, "0::"+svc+"/supervisor\n", files)
	writes := recordWrites(t, nil)
	m, err := Detect(h, Options{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != ModeCgroup2 {
		t.Fatalf("mode %s", m.Mode())
	}
	for _, w := range *writes {
		if strings.Contains(w, "cgroup.procs") {
			t.Errorf("moved itself although already in supervisor: %v", *writes)
		}
	}
	if m.Path() != h.Root+"/sys/fs/cgroup"+svc+"/g" {
		t.Errorf("group %s", m.Path())
	}
}

// EBUSY from subtree_control (processes left in the service cgroup) degrades
// to the next mode and says why.
func TestDetect_Cgroup2_EBUSY_Degrades(t *testing.T) {
	svc := "/system.slice/qubiqd.service"
	h := fakeHost(t, v2MountInfo, "0::"+svc+"\n", v2Files(svc))
	recordWrites(t, map[string]error{svc + "/cgroup.subtree_control": syscall.EBUSY})
	m, err := Detect(h, Options{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != ModeRlimit || !strings.Contains(m.Reason(), "device or resource busy") {
		t.Errorf("mode %s reason %q", m.Mode(), m.Reason())
	}
	if _, err := Detect(h, Options{Name: "g2", Mode: "cgroup2"}); err == nil {
		t.Error("forced cgroup2 on a busy cgroup did not fail")
	}
}

func TestDetect_NoCgroups_Rlimit(t *testing.T) {
	h := fakeHost(t, "22 27 0:21 / /proc rw,relatime - proc proc rw\n", "0::/\n", nil)
	m, err := Detect(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != ModeRlimit || m.Reason() == "" || m.OOMSource() != "exit-signal" {
		t.Errorf("mode %s reason %q", m.Mode(), m.Reason())
	}
	if _, err := Detect(h, Options{Mode: "bogus"}); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := Detect(h, Options{Name: "../x"}); err == nil {
		t.Error("bad name accepted")
	}
}

func TestManager_Applicable(t *testing.T) {
	tests := []struct {
		name string
		m    *Manager
		l    Limits
		want string // "" = applicable
	}{
		{"cgroup1 all", &Manager{mode: ModeCgroup1, controllers: []string{"memory", "pids", "cpu"}}, Limits{1, 2, 1}, ""},
		{"cgroup1 no cpu", &Manager{mode: ModeCgroup1, controllers: []string{"memory", "pids"}}, Limits{CPUMax: 1}, "cpu_max"},
		{"rlimit memory", &Manager{mode: ModeRlimit}, Limits{MemoryMax: 1 << 30}, ""},
		{"rlimit pids", &Manager{mode: ModeRlimit}, Limits{PidsMax: 8}, "pids_max"},
		{"rlimit cpu", &Manager{mode: ModeRlimit}, Limits{CPUMax: 1}, "cpu_max"},
		{"none unset", &Manager{mode: ModeNone}, Limits{}, ""},
		{"none memory", &Manager{mode: ModeNone}, Limits{MemoryMax: 1}, "limits are set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Applicable(tt.l)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Applicable: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseMountInfo_Escapes(t *testing.T) {
	m := parseMountInfo([]byte(`41 31 0:38 / /sys/fs/cgroup/with\040space rw - cgroup cgroup rw,memory,pids` + "\n"))
	if len(m) != 1 || m[0].point != "/sys/fs/cgroup/with space" || !slices.Equal(m[0].controllers, []string{"memory", "pids"}) {
		t.Errorf("%+v", m)
	}
}

// requireRealCgroups returns a manager on the running host, or skips when the
// machine has no writable memory and pids cgroups (not root, read-only).
func requireRealCgroups(t *testing.T) *Manager {
	t.Helper()
	m, err := Detect(Host{}, Options{Name: GroupName()})
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	if m.Mode() != ModeCgroup1 && m.Mode() != ModeCgroup2 {
		t.Skipf("this machine has no writable memory and pids cgroups (mode %s: %s)", m.Mode(), m.Reason())
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// startIn starts python with program, moves it into s while it waits on
// stdin, then lets it go; it returns the command and its output buffer.
func startIn(t *testing.T, s *Slot, program string) (*exec.Cmd, *syncBuf) {
	t.Helper()
	py := os.Getenv("PYTHON_PATH")
	if py == "" {
		py = "/usr/bin/python3"
	}
	cmd := exec.Command(py, "-I", "-S", "-c", "import sys; sys.stdin.readline()\n"+program)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuf{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.ProcsFiles() {
		if err := os.WriteFile(f, []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("join %s: %v", f, err)
		}
	}
	fmt.Fprintln(in)
	in.Close()
	return cmd, out
}

func TestSlot_Real_MemoryLimit_OOMKilled(t *testing.T) {
	m := requireRealCgroups(t)
	s, err := m.NewSlot("w0", Limits{MemoryMax: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	before, ok := s.OOMKills()
	if !ok {
		t.Fatalf("no OOM counter in mode %s", m.Mode())
	}
	cmd, out := startIn(t, s, "x = b'x' * (16 << 20)\nprint('16 MiB ok', flush=True)\ny = b'y' * (256 << 20)\nprint('256 MiB ok')\n")
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("exit %v (%s), want SIGKILL", err, out)
	}
	if !strings.Contains(out.String(), "16 MiB ok") || strings.Contains(out.String(), "256 MiB ok") {
		t.Errorf("output %q", out)
	}
	if after, _ := s.OOMKills(); after <= before {
		t.Errorf("oom_kill %d → %d, want an increase", before, after)
	}
}

func TestSlot_Real_PidsLimit_ForkBombStops(t *testing.T) {
	m := requireRealCgroups(t)
	s, err := m.NewSlot("w0", Limits{PidsMax: 8})
	if err != nil {
		t.Fatal(err)
	}
	// A bounded fork loop: children sleep until killed; the parent counts
	// the forks that succeeded.
	cmd, out := startIn(t, s, `
import os, time
n = 0
for i in range(40):
    try:
        pid = os.fork()
    except OSError as e:
        print("refused", e.errno, flush=True)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print("forked", n, flush=True)
time.sleep(60)
`)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "forked") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := out.String()
	if err := s.Kill(); err != nil {
		t.Errorf("Kill: %v", err)
	}
	_ = cmd.Wait() // killed: the status is SIGKILL
	if !strings.Contains(got, "refused 11") {
		t.Errorf("output %q: want a fork refused with EAGAIN", got)
	}
	var n int
	if i := strings.Index(got, "forked "); i >= 0 {
		fmt.Sscanf(got[i:], "forked %d", &n)
	}
	if n < 1 || n > 7 {
		t.Errorf("forked %d children with pids.max 8, want 1..7", n)
	}
	if !s.Empty() {
		t.Errorf("processes left after Kill: %v", s.procs())
	}
}

// syncBuf is an output buffer safe for the exec copier and the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Groups left by a daemon that died are removed at the next Detect; groups
// of live processes are not.
func TestDetect_RemovesStaleGroupsOfDeadDaemons(t *testing.T) {
	files := devVMFiles()
	// A pid that is not running: a child that has exited and been reaped.
	c := exec.Command("/bin/true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	dead := c.Process.Pid
	live := os.Getppid()
	for _, g := range []string{fmt.Sprintf("qubiq-sandbox-%d-1", dead), fmt.Sprintf("qubiq-sandbox-%d-1", live), "other"} {
		files["sys/fs/cgroup/pids/"+g+"/w0/"] = ""
	}
	h := fakeHost(t, devVMMountInfo, devVMCgroup, files)
	m, err := Detect(h, Options{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pids := filepath.Join(h.Root, "sys/fs/cgroup/pids")
	if _, err := os.Stat(filepath.Join(pids, fmt.Sprintf("qubiq-sandbox-%d-1", dead))); !os.IsNotExist(err) {
		t.Errorf("stale group of dead pid %d left: %v", dead, err)
	}
	for _, g := range []string{fmt.Sprintf("qubiq-sandbox-%d-1", live), "other"} {
		if _, err := os.Stat(filepath.Join(pids, g)); err != nil {
			t.Errorf("group %s removed: %v", g, err)
		}
	}
	if m.Stale() != 1 {
		t.Errorf("Stale() = %d, want 1", m.Stale())
	}
}
