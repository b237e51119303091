package tagengine

import (
	"math"
	"time"

	"qubiq.dev/edge/value"
)

// HistoryPolicy is a tag's history recording policy (project file, tag
// "history: {enabled, deadband, max_interval}"; docs/values.md): a change
// is recorded when its quality or raw status code differs from the last
// recorded one, or its value differs by more than Deadband (numbers; any
// difference for bools, strings and arrays: a deadband never holds back a
// state change); with MaxInterval > 0 the current value is recorded again,
// stamped now, when nothing was recorded for that long. This is the one
// home of the policy: the engine decides what is recorded
// (SubscribeHistory), the store only stores it.
type HistoryPolicy struct {
	Deadband    float64
	MaxInterval time.Duration
}

// Passes reports whether next is recorded after last, the last recorded
// VQT of the tag (times do not count: a device clock never decides).
func (p HistoryPolicy) Passes(last, next value.VQT) bool {
	if last.Quality != next.Quality || last.StatusCode != next.StatusCode {
		return true
	}
	a, aok := number(last.Value)
	b, bok := number(next.Value)
	if aok && bok {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.IsNaN(a) != math.IsNaN(b)
		}
		if p.Deadband > 0 {
			return math.Abs(a-b) > p.Deadband
		}
		return a != b
	}
	return !value.Equal(last.Value, next.Value)
}

// histState is what the history policy remembers of one tag: the last VQT
// recorded and when (the gateway's clock: a device clock never decides
// when a max-interval sample is due).
type histState struct {
	last value.VQT
	has  bool
	at   time.Time
}

// recordable reports whether the change v of st passes its history policy,
// and remembers it as recorded when it does. The caller holds e.mu.
func (e *Engine) recordable(st *tagState, v value.VQT) bool {
	if st.hist == nil {
		return false // no policy (st.tag.History is not read)
	}
	p := st.tag.History
	if st.hist.has && !p.Passes(st.hist.last, v) {
		e.histSkipped.Add(1)
		return false
	}
	*st.hist = histState{last: v, has: true, at: e.now()}
	return true
}

// forceHistory records again, stamped now, the current VQT of every tag
// whose policy has a MaxInterval and that recorded nothing for that long
// (HistoryPolicy). The flush loop runs it every second.
func (e *Engine) forceHistory() {
	now := e.now()
	var out []Change
	e.mu.Lock()
	for _, st := range e.timed {
		pol := st.tag.History
		if !st.hist.has || now.Sub(st.hist.at) < pol.MaxInterval {
			continue
		}
		v := st.cur
		v.Time = now.UTC()
		*st.hist = histState{last: v, has: true, at: now}
		out = append(out, Change{Path: st.tag.Path, VQT: v, record: true})
	}
	e.mu.Unlock()
	if len(out) > 0 {
		b := newBatch(out)
		e.publishHistory(b)
		b.release()
	}
}

// SubscribeHistory returns a channel of what history records, with room
// for buf pending entries, a function returning how many were dropped
// because the channel was full (docs/architecture.md: never dropped silently) and one
// that ends the subscription: every change that passes its tag's
// HistoryPolicy, and the max-interval repeats, stamped now. Tags without a
// policy never appear. Like Subscribe, it outlives a project reload
// (TakeOver).
func (e *Engine) SubscribeHistory(buf int) (ch <-chan Change, dropped func() uint64, cancel func()) {
	s := newSubscriber(buf, "history queue full; samples dropped and counted")
	e.subs.Lock()
	id := e.subs.next
	e.subs.next++
	e.subs.hist[id] = s
	e.subs.Unlock()
	return s.ch, s.dropped.Load, func() {
		e.subs.Lock()
		delete(e.subs.hist, id)
		e.subs.Unlock()
		s.close()
	}
}

// HistorySkipped returns how many changes the history policies held back
// (inside a history deadband), since New.
func (e *Engine) HistorySkipped() uint64 { return e.histSkipped.Load() }

// publishHistory offers b to the history subscribers; the caller keeps
// its reference.
func (e *Engine) publishHistory(b *batch) {
	if e.retired.Load() {
		return
	}
	e.subs.Lock()
	defer e.subs.Unlock()
	for _, s := range e.subs.hist {
		e.offer(s, b)
	}
}
