package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clkTck is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (proc(5)); 100 on every Linux this runs on.
const clkTck = 100

// ProcStat is what /proc says about one process.
type ProcStat struct {
	PID, PPID int
	CPU       float64 // user + system CPU seconds of the process itself
	RSS, HWM  float64 // VmRSS and VmHWM (peak RSS) in MiB
	// Anon and File split RSS (MiB): anonymous memory (heap, stacks) and
	// mapped files (the executable's pages, the store's mmap), which are
	// page cache the kernel can reclaim and share.
	Anon, File float64
}

// ReadProc reads /proc/PID/stat and /proc/PID/status; an error when the
// process is gone.
func ReadProc(pid int) (ProcStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: no closing parenthesis", pid)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ps := ProcStat{PID: pid}
	ps.PPID, _ = strconv.Atoi(f[1]) // field 4 of proc(5)
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	ps.CPU = (ut + st) / clkTck
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStat{}, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		kb, _ := strconv.ParseFloat(fs[0], 64)
		switch k {
		case "VmRSS":
			ps.RSS = kb / 1024
		case "VmHWM":
			ps.HWM = kb / 1024
		case "RssAnon":
			ps.Anon = kb / 1024
		case "RssFile":
			ps.File = kb / 1024
		}
	}
	return ps, nil
}

// Tree returns pid and its living descendants (children, their children
// ...), pid first. A process that exited is not in it, and neither is its
// CPU: measure over windows in which the tree keeps its members (the
// daemon's workers are started ahead and stay).
func Tree(pid int) []ProcStat {
	root, err := ReadProc(pid)
	if err != nil {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	children := map[int][]ProcStat{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == pid {
			continue
		}
		ps, err := ReadProc(n)
		if err != nil {
			continue
		}
		children[ps.PPID] = append(children[ps.PPID], ps)
	}
	out := []ProcStat{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].PID]...)
	}
	return out
}

// TreeTotals sums the CPU seconds and the RSS (MiB) of pid's tree.
func TreeTotals(pid int) (cpu, rss float64) {
	for _, p := range Tree(pid) {
		cpu += p.CPU
		rss += p.RSS
	}
	return cpu, rss
}

// Sampler samples a process tree every interval until Stop: the peak of
// the tree's summed RSS, the root's own RSS over time (for a steady
// figure), and the CPU seconds at start and stop.
type Sampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	peakTree float64
	rootRSS  []float64
	rootAnon []float64
	rootFile []float64
	cpu0     float64
	cpuRoot0 float64
	start    time.Time
}

// Sample starts sampling pid's tree every interval.
func Sample(pid int, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	s.cpu0, _ = TreeTotals(pid)
	if r, err := ReadProc(pid); err == nil {
		s.cpuRoot0 = r.CPU
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.take()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *Sampler) take() {
	tree := Tree(s.pid)
	if len(tree) == 0 {
		return
	}
	var sum float64
	for _, p := range tree {
		sum += p.RSS
	}
	s.mu.Lock()
	s.peakTree = max(s.peakTree, sum)
	s.rootRSS = append(s.rootRSS, tree[0].RSS)
	s.rootAnon = append(s.rootAnon, tree[0].Anon)
	s.rootFile = append(s.rootFile, tree[0].File)
	s.mu.Unlock()
}

// Window is what a Sampler measured between Sample and Stop.
type Window struct {
	Seconds     float64 // wall time
	TreeCPU     float64 // CPU seconds of the whole tree
	RootCPU     float64 // CPU seconds of the root process alone
	PeakTreeRSS float64 // MiB, the largest summed RSS of the tree seen
	RootHWM     float64 // MiB, the root's VmHWM at Stop (since it started)
	RootRSS     float64 // MiB, the median of the root's VmRSS samples
	RootRSSMax  float64 // MiB, the largest root VmRSS sample in the window
	RootAnon    float64 // MiB, the median of the root's RssAnon samples
	RootFile    float64 // MiB, the median of the root's RssFile samples
}

// Stop ends sampling and returns the window.
func (s *Sampler) Stop() Window {
	close(s.stop)
	<-s.done
	s.take()
	cpu, _ := TreeTotals(s.pid)
	w := Window{Seconds: time.Since(s.start).Seconds(), TreeCPU: cpu - s.cpu0}
	if r, err := ReadProc(s.pid); err == nil {
		w.RootCPU, w.RootHWM = r.CPU-s.cpuRoot0, r.HWM
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w.PeakTreeRSS = s.peakTree
	w.RootRSS = Median(s.rootRSS)
	w.RootAnon, w.RootFile = Median(s.rootAnon), Median(s.rootFile)
	for _, v := range s.rootRSS {
		w.RootRSSMax = max(w.RootRSSMax, v)
	}
	return w
}

// DirSize returns the bytes of the regular files under dir.
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
