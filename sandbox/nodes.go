package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/rpc"
)

// MaxNodeBatch is the most messages one RunNodes call takes.
const MaxNodeBatch = 256

// NodeItem is the outcome of one message of RunNodes: the entry's return
// value as JSON (Result), or why it failed for this message (Err: kind
// timeout, script_error with the exception and line, permission_denied,
// memory_limit_exceeded, killed, or bad_result for a return value that is
// not JSON), the lines it logged while handling the message and how long
// that took, in milliseconds.
type NodeItem struct {
	Result     json.RawMessage
	Err        *RunError
	Logs       []Log
	DurationMs float64
}

// KindBadResult is the kind of a NodeItem whose entry returned a value that
// is not JSON (a set, an object of a class of the script's own).
const KindBadResult = "bad_result"

// RunNodes runs entry of module once per message of msgs, in order, on one
// worker, in one fresh module namespace (the Python nodes of flows: def
// transform(msg)), for the grant g. Each message has its own timeout
// (timeout; 0 means python.node_timeout): a message that runs past it is
// killed with its worker, which the pool replaces.
//
// It returns one NodeItem per message that ran, in order. When fewer items
// than messages come back, the run stopped at the last item's message (its
// Err says why: a timeout, the worker died or ran out of memory, the
// caller's ctx ended) and the messages after it were not started: the
// caller may run them again. An error means no message ran: the module or
// entry is unknown, the runtime is missing, the queue is full (busy), the
// module itself failed to load, or msgs is empty, longer than MaxNodeBatch
// or holds a value that is not JSON.
//
// Node runs wait in the run queue like every run, under g's principal, and
// at most Config.FlowWorkers of them run at once.
func (p *Pool) RunNodes(ctx context.Context, g auth.Grant, module, entry string, msgs []json.RawMessage, timeout time.Duration) ([]NodeItem, error) {
	if len(msgs) == 0 || len(msgs) > MaxNodeBatch {
		return nil, runErr(KindInvalid, "a node run takes 1 to %d messages, not %d", MaxNodeBatch, len(msgs))
	}
	if timeout <= 0 {
		timeout = p.cfg.NodeTimeout
	}
	size := 2
	for i, m := range msgs {
		if len(m) == 0 || !json.Valid(m) {
			return nil, runErr(KindInvalid, "message %d of %s.%s is not valid JSON", i, module, entry)
		}
		size += len(m) + 1
	}
	args := make([]byte, 0, size)
	args = append(args, '[')
	for i, m := range msgs {
		if i > 0 {
			args = append(args, ',')
		}
		args = append(args, m...)
	}
	args = append(args, ']')
	j, err := p.newJob(ctx, g, module, entry, args, timeout)
	if err != nil {
		return nil, err
	}
	j.flow = true
	j.batch = msgs
	r := p.submit(j)
	p.stats.countResult(r.err)
	if r.err != nil && len(r.items) == 0 {
		return nil, r.err
	}
	return r.items, nil
}

// runBatch runs a node job on w: one exec frame, one item frame per
// message, taken by the worker's reader as they come (batch.take). Each
// message gets the job's timeout from the moment the one before it was
// answered. It returns the items of the messages that ran (the last one
// carrying the error that stopped the run early, if any), an error when
// the run failed before any message ran, and whether w may take another
// job.
func (p *Pool) runBatch(w *worker, j *job) (items []NodeItem, err error, keep bool) {
	m := j.mod
	name := m.name + "." + j.entry
	start := time.Now()
	execID := newExecID()
	msg := &rpc.Exec{Type: rpc.TypeExec, Exec: execID, Module: m.name, Version: m.version,
		Entry: j.entry, Args: j.args, Batch: true}
	if w.cached[m.name] == m {
		msg.Cached = true
	} else {
		msg.Source = m.code
	}
	oomBefore, hasOOM := uint64(0), false
	if w.conf != nil {
		oomBefore, hasOOM = w.conf.oomKills()
	}
	grant := j.grant
	runCtx, cancel := context.WithCancel(holding(j.ctx))
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(j.timeout, func() {
		timedOut.Store(true)
		w.kill()
	})
	defer timer.Stop()
	b := &batch{p: p, w: w, j: j, m: m, timer: timer, itemStart: start, last: make(chan struct{})}
	bd := &binding{execID: execID, serve: func(c *rpc.Call) *rpc.Result {
		return p.dispatch(runCtx, grant, name, c)
	}, batch: b.take}
	w.bound.Store(bd)
	defer w.bound.CompareAndSwap(bd, nil)

	// stopped ends the run early with why as the error of the message in
	// flight.
	stopped := func(why error) ([]NodeItem, error, bool) {
		re, ok := why.(*RunError)
		if !ok {
			re = runErr(KindKilled, "%v", why)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.closed = true
		if !b.done {
			b.items = append(b.items, NodeItem{Err: re, Logs: b.logs.kept(), DurationMs: msSince(b.itemStart)})
		}
		return b.items, nil, false
	}
	if err := w.send(msg); err != nil {
		return nil, p.workerDied(w, j, name, start, oomBefore, hasOOM, false), false
	}
	w.cached[m.name] = m
	w.runs++ // a batch is one run: one exec, one fresh namespace (python.recycle_after_runs)

	go func() {
		select {
		case <-w.exited:
			cancel()
		case <-runCtx.Done():
		}
	}()
	died := func() error {
		w.waitExit(5 * time.Second)
		b.mu.Lock()
		since := b.itemStart
		b.mu.Unlock()
		return p.workerDied(w, j, name, since, oomBefore, hasOOM, timedOut.Load())
	}
	for {
		select {
		case <-b.last:
			// The timer fired as the last answer came: it stands, the
			// worker goes.
			b.mu.Lock()
			defer b.mu.Unlock()
			b.closed = true
			return b.items, nil, false
		case f := <-w.frames:
			if f.err != nil {
				if errors.Is(f.err, io.EOF) || errors.Is(f.err, io.ErrUnexpectedEOF) || w.killed.Load() {
					return stopped(died())
				}
				return stopped(p.violation(w, name, f.err.Error()))
			}
			switch fm := f.msg.(type) {
			case *rpc.Call:
				if fm.Exec != execID {
					return stopped(p.violation(w, name, "a call frame names another execution"))
				}
				if err := w.sendResult(p.dispatch(runCtx, grant, name, fm)); err != nil {
					w.kill()
					return stopped(died())
				}
			case *rpc.Done:
				if fm.Exec != execID {
					return stopped(p.violation(w, name, "a done frame names another execution"))
				}
				fired := !timer.Stop()
				b.mu.Lock()
				n, recycle, bad := len(b.items), b.recycle, b.bad
				b.mu.Unlock()
				if bad != "" {
					return stopped(p.violation(w, name, bad))
				}
				keep = !fired && !recycle && p.keepAfterRun(w)
				if !fm.OK {
					if n > 0 {
						why := "no reason given"
						if fm.Error != nil {
							why = fm.Error.Type + ": " + fm.Error.Message
						}
						return stopped(p.violation(w, name, "a batch failed after some of its messages ran: "+why))
					}
					return nil, p.scriptFailed(w, m, j, fm.Error), keep && !recycleAfter(fm.Error)
				}
				if n != len(j.batch) {
					return stopped(p.violation(w, name, fmt.Sprintf("done after %d of %d messages", n, len(j.batch))))
				}
				b.mu.Lock()
				defer b.mu.Unlock()
				b.closed = true
				return b.items, nil, keep
			default:
				return stopped(p.violation(w, name, fmt.Sprintf("unexpected %T frame", f.msg)))
			}
		case <-w.exited:
			return stopped(died())
		case <-j.ctx.Done():
			w.kill()
			w.waitExit(5 * time.Second)
			if errors.Is(j.ctx.Err(), context.DeadlineExceeded) {
				p.timeouts.Add(1)
			}
			return stopped(ctxErr(j.ctx.Err(), m.name, j.entry))
		case <-p.closing:
			w.kill()
			w.waitExit(5 * time.Second)
			return stopped(runErr(KindKilled, "%s was stopped: the sandbox is shutting down", name))
		}
	}
}

// batch is a node run's results as the worker's reader takes them.
type batch struct {
	p     *Pool
	w     *worker
	j     *job
	m     *moduleCode
	timer *time.Timer
	last  chan struct{} // closed when an answer came as the timer fired

	mu        sync.Mutex
	items     []NodeItem
	logs      runLogs // of the message in flight
	itemStart time.Time
	recycle   bool
	bad       string // a frame out of order: the run ends as a violation
	done      bool   // the timer fired at the last answer: no more
	closed    bool   // runBatch returned: frames after it are not this run's
}

// take is the reader's hand for the run's item and log frames; false hands
// the frame to the slot (which ends the run as a violation).
func (b *batch) take(msg any) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.done {
		return true // the run is over; what the worker still says is dropped with it
	}
	switch fm := msg.(type) {
	case *rpc.Log:
		b.logs.add(fm.Level, fm.Msg)
		return true
	case *rpc.Item:
		if fm.Index != len(b.items) || fm.Index >= len(b.j.batch) {
			b.bad = fmt.Sprintf("item frame %d out of order", fm.Index)
			return false
		}
		it := b.p.itemOf(b.w, b.m, b.j, fm, b.logs.kept(), b.itemStart)
		if fm.Error != nil && recycleAfter(fm.Error) {
			b.recycle = true
		}
		b.items = append(b.items, it)
		b.logs, b.itemStart = runLogs{}, time.Now()
		if !b.timer.Stop() {
			// The timer fired as the message was answered: the worker is
			// being killed; the answer stands, the run ends here.
			b.done = true
			close(b.last)
			return true
		}
		b.timer.Reset(b.j.timeout)
		return true
	}
	return false
}

// itemOf turns a worker's item frame into a NodeItem.
func (p *Pool) itemOf(w *worker, m *moduleCode, j *job, fm *rpc.Item, logs []Log, start time.Time) NodeItem {
	it := NodeItem{Logs: logs, DurationMs: msSince(start)}
	switch {
	case fm.OK:
		it.Result = fm.Value
		if len(it.Result) == 0 {
			it.Result = json.RawMessage("null")
		}
	case fm.Error != nil && fm.Error.Kind == KindBadResult:
		it.Err = &RunError{Kind: KindBadResult, Detail: fm.Error.Message}
	default:
		var re *RunError
		if !errors.As(p.scriptFailed(w, m, j, fm.Error), &re) {
			re = runErr(KindKilled, "item %d of %s.%s failed without a reason", fm.Index, m.name, j.entry)
		}
		it.Err = re
	}
	return it
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
