package sandbox

import (
	"fmt"
	"sync"

	"qubiq.dev/edge/auth"
)

// The run queue: runs waiting for a worker, one FIFO per principal, served
// round robin, so one principal flooding runs cannot starve the others
// (docs/scripting.md, "Queueing and fairness").
//
// Rules, in the order they apply:
//
//   - Each run belongs to the queue of its grant's principal (realm and
//     principal name: an API key, a user, a supervisor key, a flow).
//   - A free worker takes the head run of the next principal in turn: every
//     principal with runs waiting gets one run started before any principal
//     gets a second, and a principal that had nothing waiting goes first.
//   - Runs of flows' Python nodes (RunNodes) are a class of their own: at most
//     Config.FlowWorkers of them run at once, so the other workers stay free
//     for REST, LiveView, MQTT and nested runs however busy the flows are.
//     A principal whose next run is a node run while the flows' share is in
//     use is passed over until a node run ends.
//   - The queue holds at most Config.Queue runs. When it is full, a new run
//     of a principal that holds fewer waiting runs than the principal holding
//     the most takes the place of that principal's newest run, which answers
//     busy; otherwise the new run is refused with busy. So a flood fills the
//     queue only with the flooder's own runs, and only the flooder waits.

// queueKey is the fairness key of a grant: its realm and principal.
func queueKey(g auth.Grant) string {
	p := g.Principal
	if p == "" {
		p = "(anonymous)"
	}
	return string(g.Realm) + "/" + p
}

// fifo is the waiting runs of one principal, oldest first.
type fifo struct {
	key  string
	jobs []*job
}

// runQueue is the pool's run queue. Its methods are safe for concurrent use.
type runQueue struct {
	mu    sync.Mutex
	byKey map[string]*fifo
	// ring is the principals with runs waiting, in the order they are
	// served: a principal that had none waiting joins ahead of those that
	// were served already and still have runs waiting (fresh), so a
	// principal with a single run never waits behind a flooder's second
	// (as fq_codel serves new flows first, RFC 8290 §4.2).
	ring     []*fifo
	fresh    int            // the first fresh entries of ring are principals not served since they joined
	active   map[string]int // runs popped and not finished, by principal: such a principal is not fresh
	n        int            // runs waiting in the fifos
	handed   int            // runs popped for the slots and not yet taken by one: waiting too
	limit    int            // Config.Queue
	flowMax  int            // node runs at once
	flowBusy int            // node runs handed out and not finished
	wake     chan struct{}
}

func newRunQueue(limit, flowMax int) *runQueue {
	return &runQueue{byKey: map[string]*fifo{}, active: map[string]int{}, limit: limit, flowMax: flowMax,
		wake: make(chan struct{}, 1)}
}

func (q *runQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// push queues j. When the queue is full it either evicts the newest run of
// the principal holding the most waiting runs (answered busy here; evicted
// reports it, for the pool's count of waiting runs) or refuses j with a
// *RunError of kind busy.
func (q *runQueue) push(j *job) (evicted bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	own := q.byKey[j.key]
	ownLen := 0
	if own != nil {
		ownLen = len(own.jobs)
	}
	if q.n+q.handed >= q.limit {
		var fat *fifo
		for _, f := range q.ring {
			if fat == nil || len(f.jobs) > len(fat.jobs) {
				fat = f
			}
		}
		if fat == nil || len(fat.jobs) <= ownLen+1 || fat.key == j.key {
			return false, runErr(KindBusy, "all Python workers are busy and %d runs are waiting (%d of them this caller's); retry later",
				q.n+q.handed, ownLen)
		}
		victim := fat.jobs[len(fat.jobs)-1]
		if !victim.state.CompareAndSwap(jobQueued, jobAbandoned) {
			// Abandoned by its caller a moment ago; it leaves the queue now.
			victim = nil
		}
		fat.jobs = fat.jobs[:len(fat.jobs)-1]
		q.n--
		if len(fat.jobs) == 0 {
			q.drop(fat)
		}
		if victim != nil {
			victim.done <- jobResult{err: runErr(KindBusy, "the run queue is full and %s holds the most waiting runs (%d): this run of %s gave its place to another caller's; retry later",
				fat.key, len(fat.jobs)+1, victim.name())}
		}
		evicted = true
	}
	if own == nil {
		own = &fifo{key: j.key}
		q.byKey[j.key] = own
	}
	switch {
	case len(own.jobs) > 0:
	case q.active[j.key] > 0:
		q.ring = append(q.ring, own) // running already: behind the others
	default:
		q.ring = append(q.ring, nil)
		copy(q.ring[q.fresh+1:], q.ring[q.fresh:])
		q.ring[q.fresh] = own
		q.fresh++
	}
	own.jobs = append(own.jobs, j)
	q.n++
	q.signal()
	return evicted, nil
}

// drop removes an empty fifo from the ring and the map. q.mu is held.
func (q *runQueue) drop(f *fifo) {
	for i, r := range q.ring {
		if r == f {
			q.unring(i)
			break
		}
	}
	delete(q.byKey, f.key)
}

// unring removes the i-th entry of the ring. q.mu is held.
func (q *runQueue) unring(i int) {
	q.ring = append(q.ring[:i], q.ring[i+1:]...)
	if i < q.fresh {
		q.fresh--
	}
}

// remove takes j out of the queue (its caller gave up on it) and reports
// whether it was still there.
func (q *runQueue) remove(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := q.byKey[j.key]
	if f == nil {
		return false
	}
	for i, x := range f.jobs {
		if x == j {
			f.jobs = append(f.jobs[:i], f.jobs[i+1:]...)
			q.n--
			if len(f.jobs) == 0 {
				q.drop(f)
			}
			return true
		}
	}
	return false
}

// pop returns the next run in fair order, or nil when none may start now.
// q.mu is held. A node run taken counts against the flows' share until
// finish.
func (q *runQueue) pop() *job {
	for i, f := range q.ring {
		j := f.jobs[0]
		if j.flow && q.flowMax > 0 && q.flowBusy >= q.flowMax {
			continue
		}
		f.jobs = f.jobs[1:]
		q.n--
		q.unring(i)
		if len(f.jobs) > 0 {
			q.ring = append(q.ring, f) // its next run waits for every other principal's turn
		} else {
			delete(q.byKey, f.key)
		}
		if j.flow {
			q.flowBusy++
		}
		q.handed++
		q.active[j.key]++
		return j
	}
	return nil
}

// next blocks until a run may start, and returns it; nil when closing is
// closed first.
func (q *runQueue) next(closing <-chan struct{}) *job {
	for {
		q.mu.Lock()
		j := q.pop()
		q.mu.Unlock()
		if j != nil {
			return j
		}
		select {
		case <-q.wake:
		case <-closing:
			return nil
		}
	}
}

// taken notes that a slot took (or the pool's close failed) a popped run:
// it no longer waits.
func (q *runQueue) taken() {
	q.mu.Lock()
	q.handed--
	q.mu.Unlock()
}

// finish notes that a popped run ended (or was skipped): it releases its
// place in the flows' share, and its principal counts as fresh again once
// nothing of it runs.
func (q *runQueue) finish(j *job) {
	q.mu.Lock()
	if q.active[j.key]--; q.active[j.key] <= 0 {
		delete(q.active, j.key)
	}
	if j.flow {
		q.flowBusy--
	}
	q.mu.Unlock()
	if j.flow {
		q.signal()
	}
}

// drain empties the queue and returns the runs that were waiting.
func (q *runQueue) drain() []*job {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*job
	for _, f := range q.ring {
		out = append(out, f.jobs...)
	}
	q.ring, q.byKey, q.n, q.fresh = nil, map[string]*fifo{}, 0, 0
	return out
}

// name is "module.entry" of a job, for messages.
func (j *job) name() string { return fmt.Sprintf("%s.%s", j.mod.name, j.entry) }
