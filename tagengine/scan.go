package tagengine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// The scan side of the engine: each group's scan loop (or its monitored
// items), applying readings to the tags' states, and the quality rules a
// reading passes on its way in (scaling, non-finite numbers, last usable
// values, deadbands).

func (e *Engine) scanLoop(ctx context.Context, g *group) {
	defer e.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		start := time.Now()
		gen := e.writeGen.Load()
		var buf *[]value.VQT
		var vals []value.VQT
		if r, ok := g.drv.(device.IntoReader); ok {
			buf = readBufs.Get().(*[]value.VQT)
			if cap(*buf) < len(g.points) {
				*buf = make([]value.VQT, len(g.points))
			}
			vals = (*buf)[:len(g.points)]
			r.ReadInto(ctx, g.points, vals)
		} else {
			vals = g.drv.Read(ctx, g.points)
		}
		if ctx.Err() != nil {
			return
		}
		e.apply(g, vals, gen)
		if buf != nil {
			clear(vals) // keep no values alive in the pool
			readBufs.Put(buf)
		}
		e.scans.Add(1)
		done := time.Now().UnixNano()
		g.lastScan.Store(done)
		e.progress.Store(done)
		next := g.period - time.Since(start)
		if next <= 0 {
			e.overruns.Add(1)
			next = 0
		}
		t.Reset(next)
	}
}

// readBufs are the scans' result slices (device.IntoReader), shared by
// the scan loops: only the scans in progress hold one.
var readBufs = sync.Pool{New: func() any { return new([]value.VQT) }}

// apply takes a scan's readings for g's tags. gen is the write generation
// when the read began: a tag written (and published by the engine) after
// that keeps its written value, so a value never goes backwards; the next
// scan, which the write kicked, reads the device again. The changes are
// written in place into a pooled batch (fanout.go), published as one: no
// group keeps a buffer of its own between scans.
func (e *Engine) apply(g *group, vals []value.VQT, gen uint64) {
	b := newBatch(nil)
	changes := b.c
	e.mu.Lock()
	for i, st := range g.tags {
		if i >= len(vals) {
			break
		}
		if st.written > gen {
			continue
		}
		if len(changes) == cap(changes) {
			// Room for every tag left at once, not grown by doubling (a
			// batch from the pool after a collection starts empty); a
			// scan with no change allocates nothing.
			changes = slices.Grow(changes, len(g.tags)-i)
		}
		changes = append(changes, Change{})
		if !e.updateInto(st, &vals[i], &changes[len(changes)-1]) {
			changes = changes[:len(changes)-1]
		}
	}
	e.mu.Unlock()
	b.c = changes
	if len(changes) > 0 {
		e.publishBatch(b)
	}
	b.release()
}

// applyOne takes one pushed change (a monitored item) for the i-th tag of g.
func (e *Engine) applyOne(g *group, i int, v value.VQT) {
	if i < 0 || i >= len(g.tags) {
		return
	}
	e.mu.Lock()
	c, ok := e.update(g.tags[i], v)
	e.mu.Unlock()
	if ok {
		e.publish([]Change{c})
	}
}

// update sets st's VQT from a driver's v (scaled, seeded values kept as
// Uncertain_LastUsableValue while the device is away, the last known value
// kept under a bad quality, the deadband applied) and reports the change.
// The caller holds e.mu.
func (e *Engine) update(st *tagState, v value.VQT) (Change, bool) {
	var c Change
	ok := e.updateInto(st, &v, &c)
	return c, ok
}

// updateInto is update writing the change into *out (left alone when
// there is none); in is not written.
func (e *Engine) updateInto(st *tagState, in *value.VQT, out *Change) bool {
	v := *in
	if v.Time.IsZero() {
		v.Time = time.Now().UTC()
	}
	if v.Quality.IsGood() || v.Quality.IsUncertain() {
		raw := v.Value
		if st.scaled {
			v.Value = st.tag.Scale.ToEng(v.Value)
		}
		if value.NonFinite(v.Value) != "" {
			v = nonFinite(v, raw, st.tag.PassNonFinite)
		}
	}
	if v.Quality.IsGood() && v.Value == nil {
		// A Good reading with no value (an OPC UA Null variant) would read
		// as "no value" with Good: the contract keeps null for qualities
		// other than Good.
		v.Quality, v.Reason = value.Uncertain, joinReason(v.Reason, "the device sent no value (null)")
	}
	old := &st.cur // read only before st.cur is set
	if st.seeded {
		if v.Quality.IsBad() {
			v = value.VQT{Value: old.Value, Quality: value.UncertainLastUsableValue, Time: old.Time,
				Reason: "last value before restart; device: " + v.Reason}
		} else {
			st.seeded = false
		}
	}
	if !v.Quality.IsGood() && v.Value == nil {
		// Keep the last known value with the new quality (docs/api.md,
		// REST: value is the last known value when quality is not Good).
		v.Value = old.Value
	}
	// A change of quality, of the raw status code alone (OPC UA Good →
	// Good_Clamped → Good with the same value) or of the reason is a
	// change; the deadband only holds back a value whose status stayed.
	var band Deadband // the zero Deadband passes every change: st.tag's is not read
	if st.banded {
		band = st.tag.Deadband
	}
	if old.Quality == v.Quality && old.StatusCode == v.StatusCode && old.Reason == v.Reason &&
		!band.Exceeded(old.Value, v.Value) {
		return false
	}
	st.cur = v
	st.dirty = true
	*out = Change{Path: st.tag.Path, VQT: v, record: e.recordable(st, v)}
	return true
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// nonFinite turns a Good or Uncertain reading v whose (scaled) value holds
// NaN or ±Inf into Bad_OutOfRange with a reason naming what came back (raw
// is the driver's value before scaling), the last known value kept: JSON
// has no number for it, and a Good reading with no usable value would be
// indistinguishable from "no value". OPC UA Part 4 §7.34 Bad_OutOfRange,
// "the value was out of range", is the code for a value outside every
// engineering range; Uncertain would claim the value is usable. A tag that
// opts in (pass, tag option non_finite: pass) keeps the non-finite value,
// as Uncertain with the same reason: consumers that can hold it (history,
// last values, a driver write) get it, and JSON shows null, which the
// contract allows for a quality other than Good (docs/values.md). The raw
// status code is kept.
func nonFinite(v value.VQT, raw value.Value, pass bool) value.VQT {
	what := value.NonFinite(v.Value)
	if what == "" {
		return v
	}
	reason := "the device sent " + what + " (not a finite number)"
	if value.NonFinite(raw) == "" {
		reason = "the scaled value is " + what + " (the raw value overflowed the scale)"
	}
	if pass {
		return value.VQT{Value: v.Value, Quality: value.Uncertain, Reason: reason + "; kept (non_finite: pass)",
			Time: v.Time, StatusCode: v.StatusCode, ServerTime: v.ServerTime}
	}
	return value.VQT{Quality: value.BadOutOfRange, Reason: reason + "; tag option non_finite: pass keeps it as Uncertain",
		Time: v.Time, StatusCode: v.StatusCode, ServerTime: v.ServerTime}
}

// subscribe makes g a pushed group when its driver supports monitored items
// (device.Subscriber, OPC UA Part 4 §5.12): one subscription per device and
// scan class, the scan period as sampling and publishing interval when the
// driver takes one (device.IntervalSubscriber).
func (e *Engine) subscribe(ctx context.Context, g *group) error {
	fn := func(i int, v value.VQT) { e.applyOne(g, i, v) }
	var err error
	switch d := g.drv.(type) {
	case device.IntervalSubscriber:
		err = d.SubscribeInterval(ctx, g.period, g.points, fn)
	case device.Subscriber:
		err = d.Subscribe(ctx, g.points, fn)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("device %q: subscribe: %w", g.device, err)
	}
	g.subscribed = true
	return nil
}
