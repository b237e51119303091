package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// runStats count the pool's runs by result and its worker restarts, for
// the metrics (docs/metrics.md, "Sandbox").
type runStats struct {
	restarts atomic.Uint64 // workers started again in a slot that had one
	mu       sync.Mutex
	byResult map[string]uint64
}

// RunOK is the result name of a run that returned, in Stats.Runs.
const RunOK = "ok"

// countResult counts one run (a batch of node messages is one run) by its
// result: RunOK, or the kind of its *RunError ("timeout", "busy",
// "script_error", ...; "other" for an error of no kind).
func (s *runStats) countResult(err error) {
	res := RunOK
	if err != nil {
		res = "other"
		var re *RunError
		if errors.As(err, &re) {
			res = re.Kind
		}
	}
	s.mu.Lock()
	if s.byResult == nil {
		s.byResult = map[string]uint64{}
	}
	s.byResult[res]++
	s.mu.Unlock()
}

// Stats are the pool's figures for the metrics: runs by result (RunOK or
// a RunError kind) since the pool was built, worker restarts (a slot's
// worker replaced after it died, was killed, was recycled or for new
// packages), runs killed at their timeout and by the memory limit, the
// slots, busy workers and queued runs now, and each live worker's
// resident memory in bytes (by slot; 0 when it cannot be read).
type Stats struct {
	Runs     map[string]uint64
	Restarts uint64
	Timeouts uint64
	OOMs     uint64
	Workers  int
	Live     int
	Busy     int
	Queued   int
	Memory   map[int]uint64
}

// Stats returns the pool's figures now.
func (p *Pool) Stats() Stats {
	st := Stats{Runs: map[string]uint64{}, Restarts: p.stats.restarts.Load(), Timeouts: p.timeouts.Load(),
		OOMs: p.ooms.Load(), Live: int(p.live.Load()), Busy: int(p.busy.Load()), Queued: int(p.queued.Load()),
		Memory: map[int]uint64{}}
	p.stats.mu.Lock()
	for k, n := range p.stats.byResult {
		st.Runs[k] = n
	}
	p.stats.mu.Unlock()
	for _, w := range p.Workers() {
		st.Workers++
		if w.Live && w.PID > 0 {
			st.Memory[w.Slot] = rss(w.PID)
		}
	}
	return st
}

// rss is the resident set size of process pid in bytes, from
// /proc/PID/statm (proc(5): its second field, in pages); 0 when it cannot
// be read.
func rss(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
