package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/rpc"
)

// slotLoop owns worker slot i: it takes jobs while its worker lives and
// replaces the worker when it dies, is killed, breaks the protocol, is due
// for recycling, or runs an older packages generation (then one slot at a
// time, so the others keep serving: a rolling restart). Replacement retries
// with capped exponential backoff.
func (p *Pool) slotLoop(i int, w *worker) {
	defer p.wg.Done()
	// ctx ends when the pool closes, so a respawn never delays Close.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 100 * time.Millisecond
	started := w != nil // a worker ran in this slot: the next one is a restart
	rolling := false    // this slot holds p.roll
	release := func() {
		if rolling {
			<-p.roll
			rolling = false
		}
	}
	defer release()
	discard := func() {
		p.live.Add(-1)
		p.slotDown(i)
		w.kill()
		w.waitExit(5 * time.Second)
		w.close()
		w = nil
	}
	for {
		if w != nil && w.gen != p.pkgSeq.Load() {
			select {
			case p.roll <- struct{}{}:
				rolling = true
			case <-p.closing:
				discard()
				return
			}
			p.logger.Info("sandbox worker restarting for the new packages", "slot", i, "pid", w.pid)
			discard()
		}
		if w == nil {
			conf, err := p.iso.slot(i)
			if err == nil {
				w, err = p.startWorker(ctx, conf)
			}
			if err != nil {
				release()
				p.setSlotErr(i, err)
				p.logger.Error("sandbox worker failed to start", "slot", i, "err", err, "retry_in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-p.closing:
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(backoff*2, 10*time.Second)
				continue
			}
			release()
			p.setSlotErr(i, nil)
			if started {
				p.stats.restarts.Add(1)
			}
			started = true
			p.live.Add(1)
			p.setSlot(i, w)
			backoff = 100 * time.Millisecond
		}
		p.mu.RLock()
		restart := p.restart
		p.mu.RUnlock()
		keep := true
		select {
		case <-p.closing:
			keep = false
		case <-restart:
			// A new packages generation: the loop's top restarts the worker.
		case j := <-p.jobs:
			p.queued.Add(-1)
			p.q.taken()
			if !j.state.CompareAndSwap(jobQueued, jobTaken) {
				p.q.finish(j)
				break // abandoned while queued
			}
			p.busy.Add(1)
			var r jobResult
			if j.batch != nil {
				r.items, r.err, keep = p.runBatch(w, j)
			} else {
				r.res, r.err, keep = p.runJob(w, j)
			}
			p.busy.Add(-1)
			p.countRun(i)
			p.q.finish(j)
			j.done <- r
		case f := <-w.frames:
			if f.err != nil && (errors.Is(f.err, io.EOF) || errors.Is(f.err, io.ErrUnexpectedEOF)) {
				w.waitExit(5 * time.Second)
				p.logger.Error("sandbox worker exited while idle", "pid", w.pid, "status", w.exitText(),
					"output", tail(w.out.String(), 600))
			} else {
				p.logger.Error("sandbox worker broke the protocol while idle", "pid", w.pid,
					"frame", fmt.Sprintf("%T", f.msg), "err", f.err, "output", tail(w.out.String(), 600))
			}
			keep = false
		case <-w.exited:
			p.logger.Error("sandbox worker exited while idle", "pid", w.pid, "status", w.exitText(),
				"output", tail(w.out.String(), 600))
			keep = false
		}
		if !keep {
			discard()
		}
		select {
		case <-p.closing:
			if w != nil {
				discard()
			}
			return
		default:
		}
	}
}

// runJob runs j on w. keep reports whether w may take another job.
func (p *Pool) runJob(w *worker, j *job) (res RunResult, err error, keep bool) {
	m := j.mod
	name := m.name + "." + j.entry
	start := time.Now()
	var logs runLogs
	defer func() {
		res.DurationMs = float64(time.Since(start).Microseconds()) / 1000
		res.Logs = logs.kept()
	}()

	execID := newExecID()
	msg := &rpc.Exec{Type: rpc.TypeExec, Exec: execID, Module: m.name, Version: m.version,
		Entry: j.entry, Args: j.args}
	if w.cached[m.name] == m {
		msg.Cached = true
	} else {
		msg.Source = m.code
	}
	oomBefore, hasOOM := uint64(0), false
	if w.conf != nil {
		oomBefore, hasOOM = w.conf.oomKills()
	}

	// The grant of this execution: held here, in Go, for this worker and
	// execution id only. Nothing the worker sends is read into it.
	grant := j.grant
	runCtx, cancel := context.WithDeadline(holding(j.ctx), start.Add(j.timeout))
	defer cancel()
	bd := &binding{execID: execID, serve: func(c *rpc.Call) *rpc.Result {
		return p.dispatch(runCtx, grant, name, c)
	}}
	w.bound.Store(bd)
	defer w.bound.CompareAndSwap(bd, nil)

	if err := w.send(msg); err != nil {
		return res, p.workerDied(w, j, name, start, oomBefore, hasOOM, false), false
	}
	w.cached[m.name] = m
	w.runs++

	// A service call in flight ends when the worker dies (killed at the
	// timeout, from outside, or by the OOM killer).
	go func() {
		select {
		case <-w.exited:
			cancel()
		case <-runCtx.Done():
		}
	}()
	var timedOut atomic.Bool
	timer := time.AfterFunc(j.timeout, func() {
		timedOut.Store(true)
		w.kill()
	})
	defer timer.Stop()

	for {
		select {
		case f := <-w.frames:
			if f.err != nil {
				if errors.Is(f.err, io.EOF) || errors.Is(f.err, io.ErrUnexpectedEOF) || w.killed.Load() {
					w.waitExit(5 * time.Second)
					return res, p.workerDied(w, j, name, start, oomBefore, hasOOM, timedOut.Load()), false
				}
				return res, p.violation(w, name, f.err.Error()), false
			}
			switch fm := f.msg.(type) {
			case *rpc.Call:
				if fm.Exec != execID {
					return res, p.violation(w, name, "a call frame names another execution"), false
				}
				r := p.dispatch(runCtx, grant, name, fm)
				if err := w.sendResult(r); err != nil {
					w.kill()
					w.waitExit(5 * time.Second)
					return res, p.workerDied(w, j, name, start, oomBefore, hasOOM, timedOut.Load()), false
				}
			case *rpc.Log:
				if fm.Exec != execID {
					return res, p.violation(w, name, "a log frame names another execution"), false
				}
				logs.add(fm.Level, fm.Msg)
			case *rpc.Done:
				if fm.Exec != execID {
					return res, p.violation(w, name, "a done frame names another execution"), false
				}
				if !timer.Stop() {
					// The timer fired as the run ended: the worker is being
					// killed; the result stands, the worker goes.
					keep = false
				} else {
					keep = p.keepAfterRun(w)
				}
				if fm.OK {
					res.Result = fm.Value
					if len(res.Result) == 0 {
						res.Result = json.RawMessage("null")
					}
					return res, nil, keep
				}
				return res, p.scriptFailed(w, m, j, fm.Error), keep && !recycleAfter(fm.Error)
			default:
				return res, p.violation(w, name, fmt.Sprintf("unexpected %T frame", f.msg)), false
			}
		case <-w.exited:
			return res, p.workerDied(w, j, name, start, oomBefore, hasOOM, timedOut.Load()), false
		case <-j.ctx.Done():
			w.kill()
			w.waitExit(5 * time.Second)
			if errors.Is(j.ctx.Err(), context.DeadlineExceeded) {
				p.timeouts.Add(1)
				p.logger.Warn("script timed out", "module", m.name, "entry", j.entry,
					"principal", grant.Principal, "duration", time.Since(start), "limit", "caller deadline")
			}
			return res, ctxErr(j.ctx.Err(), m.name, j.entry), false
		case <-p.closing:
			w.kill()
			w.waitExit(5 * time.Second)
			return res, runErr(KindKilled, "%s was stopped: the sandbox is shutting down", name), false
		}
	}
}

// workerDied classifies the end of a worker in the middle of a run: timeout,
// OOM (the cgroup's OOM kill counter rose, or without one a SIGKILL the
// daemon did not send) or killed.
func (p *Pool) workerDied(w *worker, j *job, name string, start time.Time, oomBefore uint64, hasOOM, timedOut bool) error {
	w.waitExit(5 * time.Second)
	d := time.Since(start)
	if timedOut {
		p.timeouts.Add(1)
		p.logger.Warn("script timed out", "module", j.mod.name, "entry", j.entry,
			"principal", j.grant.Principal, "duration", d, "timeout", j.timeout)
		return runErr(KindTimeout, "%s ran past its timeout of %v and was killed", name, j.timeout)
	}
	oom := false
	if hasOOM {
		if after, ok := w.conf.oomKills(); ok && after > oomBefore {
			oom = true
		}
	} else if !w.killed.Load() && w.killedBySignal() {
		oom = true
	}
	if oom {
		p.ooms.Add(1)
		p.logger.Warn("script exceeded the memory limit", "module", j.mod.name, "entry", j.entry,
			"principal", j.grant.Principal, "duration", d, "memory_max", p.cfg.MemoryMax)
		return runErr(KindMemory, "%s exceeded the memory limit of the worker (%s) and was killed", name,
			bytesText(p.cfg.MemoryMax))
	}
	p.logger.Error("sandbox worker died during a run", "module", j.mod.name, "entry", j.entry,
		"principal", j.grant.Principal, "status", w.exitText(), "output", tail(w.out.String(), 600))
	return runErr(KindKilled, "the worker running %s died (%s)%s", name, w.exitText(), w.outputNote())
}

// violation kills a worker that broke the protocol.
func (p *Pool) violation(w *worker, name, why string) error {
	p.logger.Error("sandbox worker broke the protocol", "pid", w.pid, "run", name, "why", why)
	w.kill()
	w.waitExit(5 * time.Second)
	return runErr(KindKilled, "the worker running %s broke the protocol (%s) and was replaced", name, why)
}

// keepAfterRun reports whether w may take another job: not past
// RecycleAfterRuns, resident memory not above RecycleAboveMemory, no more
// threads than after its handshake (a script or package left one running).
func (p *Pool) keepAfterRun(w *worker) bool {
	if p.cfg.RecycleAfterRuns > 0 && w.runs >= p.cfg.RecycleAfterRuns {
		p.logger.Debug("sandbox worker recycled", "pid", w.pid, "runs", w.runs)
		return false
	}
	rss, threads, err := w.rss()
	if err != nil {
		return true // gone already: the slot sees it exit
	}
	if p.cfg.RecycleAboveMemory > 0 && rss > p.cfg.RecycleAboveMemory {
		p.logger.Info("sandbox worker recycled: memory above the threshold", "pid", w.pid,
			"rss", rss, "threshold", p.cfg.RecycleAboveMemory)
		return false
	}
	if w.threads > 0 && threads > w.threads {
		p.logger.Info("sandbox worker recycled: a run left threads running", "pid", w.pid,
			"threads", threads, "baseline", w.threads)
		return false
	}
	return true
}

// recycleAfter reports whether a failed run leaves its worker unfit: after a
// MemoryError or RecursionError, or code refused at compile time.
func recycleAfter(e *rpc.ScriptError) bool {
	return e == nil || e.Kind == "memory" || e.Type == "MemoryError" || e.Type == "RecursionError"
}

// scriptFailed maps a worker's Done error to a RunError.
func (p *Pool) scriptFailed(w *worker, m *moduleCode, j *job, e *rpc.ScriptError) error {
	name := m.name + "." + j.entry
	if e == nil {
		return runErr(KindKilled, "the worker running %s reported a failure without a reason", name)
	}
	if e.Kind == "invalid" {
		delete(w.cached, m.name) // nothing was compiled, or the entry is missing
	}
	switch e.Kind {
	case "permission_denied":
		return &RunError{Kind: KindPermission, Detail: e.Message, Line: e.Line}
	case "memory":
		p.ooms.Add(1)
		return &RunError{Kind: KindMemory, Detail: fmt.Sprintf("%s ran out of memory (MemoryError)", name), Line: e.Line}
	case "invalid":
		return &RunError{Kind: KindInvalid, Detail: e.Message, Line: e.Line}
	}
	detail := e.Type + ": " + e.Message
	if e.Type == "" {
		detail = e.Message
	}
	return &RunError{Kind: KindScriptError, Detail: detail, Line: e.Line}
}

// dispatch serves one system.* call of the run whose grant is g: the scope
// from the one table (ScopeFor), the grant's expiry, then the Services.
func (p *Pool) dispatch(ctx context.Context, g auth.Grant, run string, c *rpc.Call) *rpc.Result {
	r := &rpc.Result{Type: rpc.TypeResult, Exec: c.Exec, ID: c.ID}
	scope, err := ScopeFor(c.Method)
	if err != nil {
		p.logger.Warn("system call refused", "run", run, "principal", g.Principal, "method", c.Method, "why", "unknown namespace")
		p.auditRefusal(g, c.Method, err)
		r.Error = &rpc.CallError{Kind: "permission_denied", Message: "refused: " + err.Error()}
		return r
	}
	if g.Expired(time.Now()) {
		de := &auth.DeniedError{Kind: "expired", Need: "an unexpired grant", Target: "system." + c.Method}
		p.auditRefusal(g, c.Method, de)
		r.Error = &rpc.CallError{Kind: "permission_denied", Message: de.Error()}
		return r
	}
	if !g.HasScope(scope) { // RequireScope's rule; its error names the target, made only for a refusal
		err := g.RequireScope(scope, "system."+c.Method)
		p.logger.Info("system call refused", "run", run, "principal", g.Principal, "method", c.Method, "scope", scope)
		p.auditRefusal(g, c.Method, err)
		r.Error = &rpc.CallError{Kind: "permission_denied", Message: err.Error(), Scope: string(scope)}
		return r
	}
	params := c.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	var v json.RawMessage
	var bin []byte
	if c.Method == "tag.read" && p.tagReader != nil {
		bin, err = readTagColumns(ctx, p.tagReader, g, params)
	} else {
		v, err = p.svc.Call(ctx, g, c.Method, params)
	}
	if err != nil {
		var de *auth.DeniedError
		if errors.As(err, &de) {
			r.Error = &rpc.CallError{Kind: "permission_denied", Message: de.Error()}
			if de.Kind == "scope" {
				r.Error.Scope = de.Need
			}
			return r
		}
		r.Error = &rpc.CallError{Kind: "error", Message: err.Error()}
		return r
	}
	r.OK = true
	if bin != nil {
		r.Binary = bin
		return r
	}
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	r.Value = v
	return r
}

// RefusalAuditor is an optional interface of Services: the dispatcher
// reports each system.* call it refuses itself (an unknown namespace, an
// expired grant, a missing scope) so the daemon can audit it (README,
// "Audit": one record per refusal). Refusals the Services decide
// themselves they audit themselves.
type RefusalAuditor interface {
	AuditRefusal(g auth.Grant, method string, reason error)
}

func (p *Pool) auditRefusal(g auth.Grant, method string, reason error) {
	if a, ok := p.svc.(RefusalAuditor); ok {
		a.AuditRefusal(g, method, reason)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func bytesText(n int64) string {
	switch {
	case n <= 0:
		return "no limit set"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
