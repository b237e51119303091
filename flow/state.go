package flow

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// counters are a flow's totals since the daemon started (gateway.FlowCounters).
type counters struct {
	in, processed, out, filtered, errors, dropped, timeouts atomic.Uint64
}

// flowState is one flow by name: its queue and counters, which outlive
// its versions, and the version running.
type flowState struct {
	e    *Engine
	name string
	q    *msgQueue
	ctr  counters
	seq  atomic.Uint64 // the trigger messages' sequence numbers

	// installMu serializes installing, stopping and resetting this
	// flow's versions (taken after Engine.adminMu, never before it).
	installMu sync.Mutex

	mu         sync.Mutex
	next       *Def // a saved version being installed
	cur        *instance
	def        *Def
	version    int64
	stoppedWhy string
	lastErr    *gateway.FlowError
	dropLog    limiter
}

// instance is one version of a flow, running: its nodes, its trigger, its
// processing loop.
type instance struct {
	e       *Engine
	fs      *flowState
	def     *Def
	version int64
	grant   auth.Grant
	nodes   map[string]*nodeRun
	// lost marks, during one batch (the loop's goroutine only), the
	// batch's trigger messages that reached a failed node.
	lost []bool

	ctx      context.Context
	cancel   context.CancelFunc
	stopCh   chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	trigMu   sync.Mutex
	trigStop []func()
	// srcDropped are the drop counters of the trigger's sources (an MQTT
	// subscription, the alarm feed): messages lost before the queue.
	srcDropped []func() uint64
	srcFolded  atomic.Bool
	// tagsOff is set once the version's tag routes are withdrawn (the
	// flow stops; a version replacing it keeps them until it takes over,
	// so no change falls between the two).
	tagsOff atomic.Bool
}

// nodeRun is one node of a running version: what it runs and its state.
type nodeRun struct {
	def                  *NodeDef
	module, entry, ref   string
	runs, errs, timeouts atomic.Uint64
	mu                   sync.Mutex
	failed               bool
	lastErr              *gateway.FlowError
	errLog, printLog     limiter
}

// limiter lets one log line through per period, counting the others.
type limiter struct {
	mu   sync.Mutex
	last time.Time
	held int
}

// allow reports whether to log now, and how many were held back since the
// last line.
func (l *limiter) allow(period time.Duration) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.last) < period {
		l.held++
		return false, 0
	}
	held := l.held
	l.last, l.held = now, 0
	return true, held
}

func (fs *flowState) current() *instance {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.cur
}

// setNext records d as the version being installed (nil: none).
func (fs *flowState) setNext(d *Def) {
	fs.mu.Lock()
	fs.next = d
	fs.mu.Unlock()
}

func (fs *flowState) nextDef() *Def {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.next
}

func (fs *flowState) install(in *instance) {
	fs.mu.Lock()
	fs.cur, fs.def, fs.version, fs.stoppedWhy = in, in.def, in.version, ""
	fs.mu.Unlock()
}

// stopped marks fs as not running, for why.
func (fs *flowState) stopped(version int64, d *Def, why string) {
	fs.mu.Lock()
	fs.cur, fs.stoppedWhy = nil, why
	if d != nil {
		fs.def = d
	}
	if version > 0 {
		fs.version = version
	}
	fs.mu.Unlock()
}

// offer puts a trigger's message into the queue, never blocking: a full
// queue drops (and counts) one message, or the oldest that make room for a
// large one. It returns how many were dropped and whether m was queued.
func (fs *flowState) offer(m *Msg) (dropped int, queued bool) {
	fs.ctr.in.Add(1)
	dropped, queued = fs.q.push(m)
	if n := dropped; n > 0 {
		fs.ctr.dropped.Add(uint64(n))
		if ok, held := fs.dropLog.allow(10 * time.Second); ok {
			n, size := fs.q.len()
			fs.e.log.Warn("flow queue full: messages dropped and counted", slog.String("flow", fs.name),
				slog.Int("queued", n), slog.Int("queue", size), slog.Int("dropped_since_last_line", held+1),
				slog.Uint64("dropped_total", fs.ctr.dropped.Load()))
		}
	}
	return dropped, queued
}

// noteError records a node failure as the flow's last error.
func (fs *flowState) noteError(fe *gateway.FlowError) {
	fs.mu.Lock()
	fs.lastErr = fe
	fs.mu.Unlock()
	fs.ctr.errors.Add(1)
	if fe.Kind == "timeout" {
		fs.ctr.timeouts.Add(1)
	}
}

// status is the flow's gateway.FlowStatus.
func (fs *flowState) status() gateway.FlowStatus {
	// Counters first, then the last error: noteError sets the error
	// before it counts it, so a counted error is always shown.
	c := &fs.ctr
	ctr := gateway.FlowCounters{In: c.in.Load(), Processed: c.processed.Load(), Out: c.out.Load(),
		Filtered: c.filtered.Load(), Errors: c.errors.Load(), Dropped: c.dropped.Load(), Timeouts: c.timeouts.Load()}
	fs.mu.Lock()
	in, d, version, why, lastErr := fs.cur, fs.def, fs.version, fs.stoppedWhy, fs.lastErr
	fs.mu.Unlock()
	n, size := fs.q.len()
	st := gateway.FlowStatus{Name: fs.name, Version: version, Queue: n, QueueSize: size, LastError: lastErr,
		Nodes: []gateway.NodeStatus{}}
	if d != nil {
		st.Description, st.Trigger = d.Description, d.Trigger.String()
	}
	if in != nil {
		src := in.sourceDropped()
		ctr.In += src
		ctr.Dropped += src
	}
	st.Counters = ctr
	switch {
	case in == nil:
		st.State, st.Reason = gateway.FlowStopped, why
	default:
		st.State = gateway.FlowRunning
		var failed []string
		for _, nd := range in.def.Nodes {
			nr := in.nodes[nd.ID]
			ns := nr.status()
			if ns.State == gateway.FlowFailed {
				failed = append(failed, fmt.Sprintf("node %s failed: %s: %s", nd.ID, ns.LastError.Kind, ns.LastError.Message))
			}
			st.Nodes = append(st.Nodes, ns)
		}
		if len(failed) > 0 {
			sort.Strings(failed)
			st.State, st.Reason = gateway.FlowFailed, failed[0]
			if len(failed) > 1 {
				st.Reason += fmt.Sprintf(" (and %d more nodes failed)", len(failed)-1)
			}
			st.Reason += "; POST /api/v1/flows/" + fs.name + "/reset runs it again"
		}
	}
	return st
}

func (nr *nodeRun) status() gateway.NodeStatus {
	runs, errs, timeouts := nr.runs.Load(), nr.errs.Load(), nr.timeouts.Load() // before the last error, as in flowState.status
	nr.mu.Lock()
	failed, lastErr := nr.failed, nr.lastErr
	nr.mu.Unlock()
	ns := gateway.NodeStatus{ID: nr.def.ID, Type: nr.def.Type, State: "ok", Runs: runs,
		Errors: errs, Timeouts: timeouts, LastError: lastErr}
	if failed {
		ns.State = gateway.FlowFailed
	}
	return ns
}

func (nr *nodeRun) isFailed() bool {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	return nr.failed
}

// sourceDropped is what the trigger's sources lost, once folded into the
// counters when the instance stops.
func (in *instance) sourceDropped() uint64 {
	if in.srcFolded.Load() {
		return 0
	}
	in.trigMu.Lock()
	defer in.trigMu.Unlock()
	var n uint64
	for _, f := range in.srcDropped {
		n += f()
	}
	return n
}

// start starts the processing loop, then the trigger.
func (in *instance) start() error {
	in.ctx, in.cancel = context.WithCancel(in.e.ctx)
	in.stopCh, in.done = make(chan struct{}), make(chan struct{})
	go in.loop()
	return in.startTrigger()
}

// stopGrace is how long a stopping version may take to finish the batch
// it is running before its node runs are cancelled.
const stopGrace = 10 * time.Second

// stop stops the trigger, then lets the loop finish its batch (within
// stopGrace and ctx, then its runs are cancelled); the queued messages
// stay for the next version. replacing keeps the tag routes feeding the
// queue until the next version is installed.
func (in *instance) stop(ctx context.Context, replacing bool) {
	in.stopOnce.Do(func() {
		in.stopTrigger(replacing)
		if in.stopCh == nil {
			return
		}
		close(in.stopCh)
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-in.done:
		case <-t.C:
			in.cancel()
			<-in.done
		case <-ctx.Done():
			in.cancel()
			<-in.done
		}
		in.cancel()
	})
}

// stopTrigger stops the trigger's sources and folds what they lost into
// the counters.
func (in *instance) stopTrigger(keepTags bool) {
	in.trigMu.Lock()
	stops := in.trigStop
	in.trigStop = nil
	in.trigMu.Unlock()
	for _, s := range stops {
		s()
	}
	if in.fs != nil && in.srcFolded.CompareAndSwap(false, true) {
		in.trigMu.Lock()
		var n uint64
		for _, f := range in.srcDropped {
			n += f()
		}
		in.trigMu.Unlock()
		in.fs.ctr.in.Add(n)
		in.fs.ctr.dropped.Add(n)
	}
	if !keepTags {
		in.tagsOff.Store(true)
		in.e.rebuildRoutes()
	}
}

// release forgets the version's prepared Python nodes.
func (in *instance) release() {
	for _, nr := range in.nodes {
		if nr.ref != "" {
			in.e.gw.ReleaseNode(nr.ref)
		}
	}
}

// reset clears the version's failed nodes and returns their ids.
func (in *instance) reset() []string {
	var ids []string
	for _, nd := range in.def.Nodes {
		nr := in.nodes[nd.ID]
		nr.mu.Lock()
		if nr.failed {
			nr.failed = false
			ids = append(ids, nd.ID)
		}
		nr.mu.Unlock()
	}
	return ids
}
