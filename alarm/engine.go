package alarm

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

// Source is the tag engine as the alarms see it (the service layer
// adapts tagengine.Engine; alarm does not import tagengine, which would
// link the drivers' device package).
type Source interface {
	// Subscribe delivers every change of the tags whose path want
	// accepts into a channel with room for buf changes (want is called
	// from the tag engine's scans and changes as the definitions do; the
	// engine reads the current value of a tag it starts to watch). A
	// change that finds the channel full is lost and counted by dropped;
	// the channel must never block the tag engine. cancel ends the
	// subscription.
	Subscribe(buf int, want func(path string) bool) (ch <-chan Change, dropped func() uint64, cancel func())
	// Read returns the current VQT of each path, in order (an unknown
	// path Bad_NodeIdUnknown).
	Read(paths []string) []value.VQT
}

// Journal is where the alarms persist: the journal of transitions and each
// alarm's state (*store.DB implements it, store/alarm.go).
type Journal interface {
	CommitAlarms(entries []store.AlarmEntry, states []store.AlarmState, deleted []string) error
	LoadAlarmStates() (map[string][]byte, error)
	QueryAlarmJournal(q store.AlarmQuery) ([]store.AlarmEntry, uint64, error)
	ScanAlarmJournal(from time.Time, limit int, fn func(store.AlarmEntry) bool) error
	PruneAlarmJournal(before time.Time, maxBytes int64) (int, error)
	AlarmJournalInfo() (store.AlarmJournalInfo, error)
}

// Options configure an Engine.
type Options struct {
	Settings Settings
	// Journal persists the journal and the states; nil keeps them in
	// memory only (tests).
	Journal Journal
	// Source feeds the tag changes; nil: the engine only evaluates what
	// Apply gives it (tests).
	Source Source
	Log    *slog.Logger
	// Now is the engine's clock (default time.Now); the state machine
	// reads no other.
	Now func() time.Time
}

// Engine evaluates the alarms of a project against the tag engine's
// changes, keeps their ISA-18.2 states, journals every transition and
// persists the states, and serves the operations on them. Build it with
// New, start it with Start before the tag engine's scans start (so it sees
// their first values), Stop it after them. It is safe for concurrent use.
type Engine struct {
	opts Options
	set  Settings
	log  *slog.Logger
	now  func() time.Time

	mu     sync.Mutex
	insts  []*inst
	byID   map[string]*inst
	byPath map[string][]ref
	// watched is byPath for the feed's filter (watches), which the tag
	// engine calls without mu: build replaces the map, never writes it
	// once stored.
	watched atomic.Pointer[map[string][]ref]
	queue   deadlines
	pending []Transition       // emitted, not committed yet
	deleted []string           // states to delete at the next commit
	unsaved []store.AlarmEntry // entries of failed commits, retried first
	// resyncAt holds, per tag, the time of the value a resync read: a
	// queued change older than it is stale and skipped.
	resyncAt map[string]time.Time
	stats    *stats
	subs     map[int]*subscriber
	nextSub  int

	// Counters (under mu unless atomic).
	evaluations   uint64
	activations   uint64
	transitions   uint64
	chatterTotal  uint64
	changes       uint64
	resyncs       uint64
	commitErrors  uint64
	lostEntries   uint64
	lastCommitErr error
	lastResync    time.Time
	feedDropped   atomic.Uint64
	subDropped    atomic.Uint64

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// feed is the subscription to the source's changes (under mu): held
	// only while the engine runs and has alarms, so a project without
	// alarms costs the tag engine no subscriber (feed.go).
	feed    *feed
	running bool
}

// ref is one alarm reading a tag in a role.
type ref struct {
	in   *inst
	role int
}

// New builds the engine of the alarms insts (from Parse), restoring each
// one's persisted state (an alarm active and unacknowledged before a
// restart is so after it, until it is re-evaluated against the first fresh
// value of its source) and the statistics of the last 24 h from the
// journal. Nothing runs until Start.
func New(opts Options, insts []Instance) (*Engine, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Engine{opts: opts, set: opts.Settings.withDefaults(), log: opts.Log, now: opts.Now,
		byID: map[string]*inst{}, byPath: map[string][]ref{}, resyncAt: map[string]time.Time{},
		stats: newStats(), subs: map[int]*subscriber{}, kick: make(chan struct{}, 1)}
	var states map[string][]byte
	if opts.Journal != nil {
		var err error
		if states, err = opts.Journal.LoadAlarmStates(); err != nil {
			return nil, fmt.Errorf("alarms: %w", err)
		}
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.build(insts)
	for id, b := range states {
		in, ok := e.byID[id]
		if !ok {
			e.deleted = append(e.deleted, id) // its definition left the project while we were stopped
			continue
		}
		if err := in.restore(b); err != nil {
			e.log.Warn("alarm state not restored", slog.String("alarm", id), slog.Any("err", err))
		}
	}
	e.applyOutOfService(now)
	for _, in := range e.insts {
		e.boundShelf(in, now)
		if in.shelf != nil && !now.Before(in.shelf.Until) {
			e.unshelve(in, in.shelf.Until, "", "shelve expired while qubiqd was stopped")
		}
		e.schedule(in)
	}
	if opts.Journal != nil {
		e.rebuildStats(now)
	}
	e.flushLocked()
	return e, nil
}

// boundShelf keeps a restored shelve within Settings.MaxShelve: at most
// that long after it was made, and after now (a max_shelve lowered since,
// or a clock that stood in the future when the shelve was made, must not
// make a shelve last longer; shelving is never forever).
func (e *Engine) boundShelf(in *inst, now time.Time) {
	s := in.shelf
	if s == nil {
		return
	}
	limit := s.At.Add(e.set.MaxShelve)
	if l := now.Add(e.set.MaxShelve); l.Before(limit) {
		limit = l
	}
	if s.Until.After(limit) {
		c := *s
		c.Until = limit
		in.shelf = &c
		in.dirty = true
	}
}

// build makes the run-time alarms of insts (keeping the state of those
// already known by id) and indexes the tags they read.
func (e *Engine) build(insts []Instance) {
	old := e.byID
	e.insts = make([]*inst, 0, len(insts))
	e.byID = make(map[string]*inst, len(insts))
	e.byPath = map[string][]ref{}
	for _, x := range insts {
		in, ok := old[x.ID]
		if ok {
			in.Instance = x
		} else {
			in = &inst{Instance: x, acked: true}
		}
		e.insts = append(e.insts, in)
		e.byID[x.ID] = in
		d := x.Def
		e.byPath[x.Source] = append(e.byPath[x.Source], ref{in, roleSource})
		for i, op := range []Operand{d.Setpoint, d.Low, d.High} {
			if op.Tag != "" {
				e.byPath[op.Tag] = append(e.byPath[op.Tag], ref{in, roleSetpoint + i})
			}
		}
		if d.SuppressedBy != "" {
			e.byPath[d.SuppressedBy] = append(e.byPath[d.SuppressedBy], ref{in, roleSuppress})
		}
	}
	m := e.byPath
	e.watched.Store(&m)
}

// watches reports whether an alarm reads the tag at path: the feed
// carries only those changes (applyOne ignores the others).
func (e *Engine) watches(path string) bool {
	m := e.watched.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[path]
	return ok
}

// applyOutOfService takes the alarms out of service, or returns them, as
// their definitions say.
func (e *Engine) applyOutOfService(now time.Time) {
	for _, in := range e.insts {
		e.setOutOfService(in, in.Def.OutOfService, now)
	}
}

// Start subscribes to the source's changes (while the project has
// alarms: SetDefinitions subscribes when the first arrive and lets go
// when the last leave), evaluates every alarm against the current values
// (after a restart these are the last values, not Good: the alarms keep
// their restored state until a fresh value arrives) and starts the
// evaluation loop. Call it before the tag engine starts its scans.
func (e *Engine) Start(ctx context.Context) error {
	if e.opts.Source == nil {
		return errors.New("alarms: no source")
	}
	e.mu.Lock()
	e.running = true
	e.syncFeedLocked()
	e.resyncLocked(e.now(), false)
	e.flushLocked()
	e.mu.Unlock()
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = stop
	e.done = make(chan struct{})
	go e.loop(lctx)
	return nil
}

// Stop ends the evaluation loop and the subscription, and commits what is
// pending.
func (e *Engine) Stop(context.Context) error {
	if e.cancel != nil {
		e.cancel()
		<-e.done
		e.cancel = nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = false
	e.syncFeedLocked()
	e.flushLocked()
	return e.lastCommitErr
}

// A pass of the evaluation loop takes at most batchMax changes from the
// feed. After the feed runs dry it waits up to batchQuiet for more (a scan
// delivers its changes in a burst), at most batchLinger after the first:
// one pass, and one journal commit, per burst rather than one per
// scheduling slice of the burst.
const (
	batchMax    = 16384
	batchQuiet  = time.Millisecond
	batchLinger = 20 * time.Millisecond
)

// collect adds to batch the changes of the feed's current burst.
func (e *Engine) collect(ch <-chan Change, batch []Change, t *time.Timer) []Change {
	deadline := time.Now().Add(batchLinger)
	for len(batch) < batchMax {
		select {
		case c := <-ch:
			batch = append(batch, c)
			continue
		default:
		}
		wait := min(batchQuiet, time.Until(deadline))
		if wait <= 0 {
			return batch
		}
		t.Reset(wait)
		select {
		case c := <-ch:
			t.Stop() // Go 1.23 timers: no stale tick is delivered after Stop
			batch = append(batch, c)
		case <-t.C:
			return batch
		}
	}
	return batch
}

// loop is the evaluation loop: changes from the feed, deadlines, the
// feed's overflow (a resync from current values), retention.
//
// Why no change is lost silently: the feed is a dedicated subscription of
// the tag engine with room for Settings.FeedBuffer changes (64 Ki by
// default), drained in batches of up to 8192 by this loop alone. The tag
// engine never blocks on it (a blocked fan-out would stall every scan); a
// change that finds it full is counted by the tag engine (dropped). The
// loop compares that count after every pass: when it rose, it logs it,
// counts a resync, and re-evaluates every alarm from the tags' current
// values (Source.Read), so no alarm stays in a state its tag no longer
// supports. What a resync cannot recover is a transition that began and
// ended inside the lost changes; the count and health say it happened.
func (e *Engine) loop(ctx context.Context) {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	retention := time.NewTicker(e.set.RetentionEvery)
	defer retention.Stop()
	batch := make([]Change, 0, 256)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		e.mu.Lock()
		next := e.queue.next()
		f := e.feed
		e.mu.Unlock()
		var ch <-chan Change // nil while there is no feed: never ready
		if f != nil {
			ch = f.ch
		}
		timer.Stop() // Go 1.23 timers: no stale tick is delivered after Stop
		if !next.IsZero() {
			timer.Reset(max(next.Sub(e.now()), 0))
		}
		select {
		case <-ctx.Done():
			return
		case c := <-ch:
			batch = e.collect(ch, append(batch[:0], c), linger)
			e.Apply(batch)
		case <-timer.C:
			e.Advance()
		case <-e.kick:
		case <-retention.C:
			e.retention()
		}
		if f == nil {
			continue
		}
		if lost := f.lost(); lost > 0 {
			e.feedDropped.Add(lost)
			e.log.Warn("alarm feed overflowed: re-evaluating every alarm from current values",
				slog.Uint64("changes_lost", lost), slog.Uint64("changes_lost_total", e.feedDropped.Load()))
			e.mu.Lock()
			e.resyncLocked(e.now(), true)
			e.flushLocked()
			e.mu.Unlock()
		}
	}
}

// Apply evaluates the alarms that read the changed tags, in order, at the
// engine's time now, then commits and publishes the transitions.
func (e *Engine) Apply(changes []Change) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.runDue(now)
	for _, c := range changes {
		e.applyOne(c.Path, c.VQT, now)
	}
	e.flushLocked()
}

// Advance handles the deadlines that passed (delays, shelve expiries,
// chattering windows) at the engine's time now.
func (e *Engine) Advance() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runDue(e.now())
	e.flushLocked()
}

func (e *Engine) runDue(now time.Time) {
	for {
		d, ok := e.queue.popDue(now)
		if !ok {
			return
		}
		in := d.in
		if d.gen != in.gen {
			continue // superseded
		}
		in.sched = time.Time{}
		if e.byID[in.ID] != in {
			continue // removed by a project import
		}
		e.tick(in, now)
	}
}

// applyOne feeds one tag change to the alarms reading it.
func (e *Engine) applyOne(path string, v value.VQT, now time.Time) {
	refs := e.byPath[path]
	if len(refs) == 0 {
		return
	}
	if t, ok := e.resyncAt[path]; ok {
		if v.Time.Before(t) {
			return // queued before the value a resync already used
		}
		delete(e.resyncAt, path)
	}
	e.changes++
	for _, r := range refs {
		r.in.setInput(r.role, v, now)
		e.evaluate(r.in, now)
	}
}

// resyncLocked re-reads every tag the alarms read and evaluates them
// (counted when the feed overflowed).
func (e *Engine) resyncLocked(now time.Time, overflow bool) {
	if e.opts.Source == nil || len(e.byPath) == 0 {
		return
	}
	if overflow {
		e.resyncs++
		e.lastResync = now
	}
	paths := make([]string, 0, len(e.byPath))
	for p := range e.byPath {
		paths = append(paths, p)
	}
	vals := e.opts.Source.Read(paths)
	for i, p := range paths {
		if i >= len(vals) {
			break
		}
		delete(e.resyncAt, p)
		e.applyOne(p, vals[i], now)
		e.resyncAt[p] = vals[i].Time
	}
}

// SetDefinitions replaces the alarms with insts (a project import): alarms
// whose id stays keep their state and are re-evaluated against the current
// values; new ones start normal; removed ones leave the journal a
// "removed" entry and their state is deleted.
func (e *Engine) SetDefinitions(insts []Instance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	keep := map[string]bool{}
	for _, x := range insts {
		keep[x.ID] = true
	}
	for _, in := range e.insts {
		if !keep[in.ID] {
			e.emit(in, now, EventRemoved, in.stateName(), Normal.String(), "its definition was removed from the project", "project", "")
			in.dirty = false
			e.deleted = append(e.deleted, in.ID)
		}
	}
	e.build(insts)
	e.applyOutOfService(now)
	e.queue = e.queue[:0]
	for _, in := range e.insts {
		in.sched = time.Time{}
		e.schedule(in)
	}
	e.syncFeedLocked()
	e.resyncLocked(now, false)
	e.flushLocked()
	e.wake()
}

// schedule queues the alarm's next deadline, if it has one that is not
// queued yet.
func (e *Engine) schedule(in *inst) {
	next := e.nextDeadline(in)
	if next.IsZero() || next.Equal(in.sched) {
		return
	}
	in.gen++
	in.sched = next
	heap.Push(&e.queue, deadline{at: next, in: in, gen: in.gen})
}

// wake makes the loop recompute its timer (an operation queued an earlier
// deadline).
func (e *Engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// emit records a transition of in at at: the journal entry and the event
// for subscribers, both sent at the next commit.
func (e *Engine) emit(in *inst, at time.Time, event, from, to, cause, by, note string) {
	in.lastChange = at
	in.dirty = true
	e.transitions++
	e.pending = append(e.pending, Transition{At: at, Event: event, From: from, To: to, Cause: cause, By: by, Note: note,
		Value: in.src.Value, Quality: in.src.Quality, Alarm: e.snapshot(in)})
}

// maxUnsaved bounds the journal entries kept for a retry while the journal
// cannot commit; beyond it the oldest are dropped and counted.
const maxUnsaved = 100000

// flushLocked commits the pending transitions and the changed states in
// one transaction, then publishes the transitions to the subscribers
// (after the commit: what a subscriber saw is on disk). A failed commit is
// logged and counted; its entries and states are retried at the next one,
// and its transitions are published all the same with Seq 0: an alarm
// reaches the operator even while the disk fails (docs/alarms.md, "The
// journal").
func (e *Engine) flushLocked() {
	var states []store.AlarmState
	for _, in := range e.insts {
		if in.dirty {
			states = append(states, store.AlarmState{ID: in.ID, Data: in.record()})
		}
	}
	if len(e.pending) == 0 && len(states) == 0 && len(e.deleted) == 0 && len(e.unsaved) == 0 {
		return
	}
	entries := make([]store.AlarmEntry, 0, len(e.unsaved)+len(e.pending))
	entries = append(entries, e.unsaved...)
	for _, t := range e.pending {
		entries = append(entries, store.AlarmEntry{At: t.At, ID: t.Alarm.ID, Source: t.Alarm.Source, Priority: t.Alarm.Priority.String(),
			Event: t.Event, From: t.From, To: t.To, Cause: t.Cause, By: t.By, Value: t.Value, Quality: t.Quality, Note: t.Note})
	}
	var err error
	if e.opts.Journal != nil {
		err = e.opts.Journal.CommitAlarms(entries, states, e.deleted)
	}
	if err != nil {
		e.commitErrors++
		if e.lastCommitErr == nil || e.commitErrors%100 == 1 {
			e.log.Error("alarm journal commit failed; retrying with the next commit", slog.Any("err", err),
				slog.Int("entries", len(entries)), slog.Uint64("failures", e.commitErrors))
		}
		e.lastCommitErr = err
		e.unsaved = entries
		if n := len(e.unsaved) - maxUnsaved; n > 0 {
			e.unsaved = e.unsaved[n:]
			e.lostEntries += uint64(n)
		}
	} else {
		if e.lastCommitErr != nil {
			e.log.Info("alarm journal commits again", slog.Int("entries", len(entries)))
		}
		e.lastCommitErr = nil
		off := len(e.unsaved)
		e.unsaved = nil
		for i := range e.pending {
			e.pending[i].Seq = entries[off+i].Seq
		}
		for _, in := range e.insts {
			in.dirty = false
		}
		e.deleted = nil
	}
	e.publish(e.pending)
	e.pending = e.pending[:0]
}

// stateRecord is an alarm's persisted state.
type stateRecord struct {
	V           int       `json:"v"`
	Active      bool      `json:"active"`
	Acked       bool      `json:"acked"`
	Latched     bool      `json:"latched,omitempty"`
	ActiveSince time.Time `json:"active_since,omitzero"`
	AckedAt     time.Time `json:"acked_at,omitzero"`
	AckedBy     string    `json:"acked_by,omitempty"`
	LastChange  time.Time `json:"last_change,omitzero"`
	Shelf       *Shelf    `json:"shelf,omitempty"`
	Suppressed  bool      `json:"suppressed,omitempty"`
	OOS         bool      `json:"out_of_service,omitempty"`
	Notes       []Note    `json:"notes,omitempty"`
}

func (in *inst) record() []byte {
	b, _ := json.Marshal(stateRecord{V: 1, Active: in.active, Acked: in.acked, Latched: in.latched,
		ActiveSince: in.activeSince, AckedAt: in.ackedAt, AckedBy: in.ackedBy, LastChange: in.lastChange,
		Shelf: in.shelf, Suppressed: in.suppressed, OOS: in.oos, Notes: in.notes})
	return b
}

// restore takes a persisted state. The alarm is not evaluable until its
// source gives a Good value.
func (in *inst) restore(b []byte) error {
	var r stateRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	if r.V != 1 {
		return fmt.Errorf("state record version %d: this build knows 1", r.V)
	}
	in.active, in.acked, in.latched = r.Active, r.Acked, r.Latched
	in.activeSince, in.ackedAt, in.ackedBy, in.lastChange = r.ActiveSince, r.AckedAt, r.AckedBy, r.LastChange
	in.shelf, in.suppressed, in.oos, in.notes = r.Shelf, r.Suppressed, r.OOS, r.Notes
	if in.overlaid() {
		in.acked = true
	}
	return nil
}

// rebuildStats refills the statistics of the last 24 h from the journal:
// the annunciated activations, and the activations of the chattering
// windows.
func (e *Engine) rebuildStats(now time.Time) {
	from := now.Add(-statsSpan)
	err := e.opts.Journal.ScanAlarmJournal(from, 2_000_000, func(en store.AlarmEntry) bool {
		if countsAsAnnunciation(en.Event, en.To) {
			e.stats.record(en.At, en.ID)
		}
		if in, ok := e.byID[en.ID]; ok && (en.Event == EventActivate || en.Event == EventActivateSilent) &&
			now.Sub(en.At) < e.chatterRule(in).Window {
			in.acts = append(in.acts, en.At)
		}
		return true
	})
	if err != nil {
		e.log.Warn("alarm statistics not rebuilt from the journal", slog.Any("err", err))
	}
	for _, in := range e.insts {
		if rule := e.chatterRule(in); len(in.acts) >= rule.Count {
			in.chattering = true
		}
	}
}

// countsAsAnnunciation reports whether a journal entry presented an
// alarm to operators (EEMUA 191 counts those): an annunciated activation,
// or an alarm still active when its shelving, suppression or out of
// service ended.
func countsAsAnnunciation(event, to string) bool {
	switch event {
	case EventActivate:
		return true
	case EventUnshelve, EventUnsuppress, EventInService:
		return to == ActiveUnacked.String() || to == ActiveAcked.String()
	}
	return false
}

// retention removes journal entries past Settings' age and size.
func (e *Engine) retention() {
	if e.opts.Journal == nil {
		return
	}
	var before time.Time
	if e.set.JournalMaxAge > 0 {
		before = e.now().Add(-e.set.JournalMaxAge)
	}
	n, err := e.opts.Journal.PruneAlarmJournal(before, e.set.JournalMaxBytes)
	if err != nil {
		e.log.Error("alarm journal retention failed", slog.Any("err", err))
		return
	}
	if n > 0 {
		e.log.Debug("alarm journal retention", slog.Int("removed", n))
	}
}

// deadline is one queued deadline of an alarm.
type deadline struct {
	at  time.Time
	in  *inst
	gen uint64
}

// deadlines is a min-heap of deadlines (container/heap).
type deadlines []deadline

func (q deadlines) Len() int           { return len(q) }
func (q deadlines) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q deadlines) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *deadlines) Push(x any)        { *q = append(*q, x.(deadline)) }
func (q *deadlines) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (q deadlines) next() time.Time {
	if len(q) == 0 {
		return time.Time{}
	}
	return q[0].at
}

func (q *deadlines) popDue(now time.Time) (deadline, bool) {
	if len(*q) == 0 || (*q)[0].at.After(now) {
		return deadline{}, false
	}
	return heap.Pop(q).(deadline), true
}
