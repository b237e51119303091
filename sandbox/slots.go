package sandbox

import (
	"context"
	"fmt"
	"time"
)

// slotInfo is what the pool knows of one worker slot (under Pool.mu).
type slotInfo struct {
	pid     int
	gen     uint64
	live    bool
	started time.Time
	runs    int
}

// WorkerInfo describes one worker slot: its index, the worker's process id
// (0 while none runs), whether it is live (handshake done, taking runs),
// when it started, how many runs it has done, and the packages generation
// it runs (Pool.Workers).
type WorkerInfo struct {
	Slot       int       `json:"slot"`
	PID        int       `json:"pid"`
	Live       bool      `json:"live"`
	Started    time.Time `json:"started,omitzero"`
	Runs       int       `json:"runs"`
	Generation uint64    `json:"generation"`
}

// Workers returns the state of every worker slot, by slot index.
func (p *Pool) Workers() []WorkerInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]WorkerInfo, len(p.slots))
	for i, s := range p.slots {
		out[i] = WorkerInfo{Slot: i, PID: s.pid, Live: s.live, Started: s.started, Runs: s.runs, Generation: s.gen}
	}
	return out
}

func (p *Pool) setSlot(i int, w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < len(p.slots) {
		p.slots[i] = slotInfo{pid: w.pid, gen: w.gen, live: true, started: w.started}
	}
}

func (p *Pool) slotDown(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < len(p.slots) {
		p.slots[i].live = false
		p.slots[i].pid = 0
	}
}

func (p *Pool) countRun(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < len(p.slots) {
		p.slots[i].runs++
	}
}

// restartTimeout bounds how long an install waits for every worker to run
// the new packages generation.
const restartTimeout = 60 * time.Second

// rollWorkers starts a new packages generation for the workers: every
// slot replaces its worker, one slot at a time, as soon as it is idle. It
// returns when every slot runs a worker of the new generation, or with an
// error after restartTimeout (the workers keep restarting on their own).
func (p *Pool) rollWorkers(ctx context.Context) error {
	p.mu.Lock()
	seq := p.pkgSeq.Add(1)
	close(p.restart)
	p.restart = make(chan struct{})
	ok := p.status == "ok" && !p.closed
	p.mu.Unlock()
	if !ok {
		return nil
	}
	deadline := time.NewTimer(restartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.slotsAt(seq) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox: restarting the workers: %w", ctx.Err())
		case <-p.closing:
			return nil
		case <-deadline.C:
			return fmt.Errorf("sandbox: the workers did not all restart within %v; they go on restarting", restartTimeout)
		case <-tick.C:
		}
	}
}

// slotsAt reports whether every slot runs a live worker of generation seq
// or later.
func (p *Pool) slotsAt(seq uint64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, s := range p.slots {
		if !s.live || s.gen < seq {
			return false
		}
	}
	return true
}
