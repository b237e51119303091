package tagengine

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

func changesN(from, n int) []Change {
	out := make([]Change, n)
	for i := range out {
		out[i] = Change{Path: strconv.Itoa(from + i)}
	}
	return out
}

// A subscriber holds about buf pending changes (the channel's handoff
// plus the queue), drops and counts the rest, and delivers what it kept in
// order; once drained, new changes go straight into the channel again.
func TestSubscriber_BoundedOrderedCounted(t *testing.T) {
	s := newSubscriber(200, "full")
	defer s.close()
	first := newBatch(changesN(0, 1000))
	if lost := s.offer(first); lost != 800 {
		t.Fatalf("lost %d of 1000 offered to a subscriber of 200, want 800", lost)
	}
	for i := range 200 {
		select {
		case c := <-s.ch:
			if c.Path != strconv.Itoa(i) {
				t.Fatalf("change %d is %s: order not kept", i, c.Path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of the 200 kept changes delivered", i)
		}
	}
	select {
	case c := <-s.ch:
		t.Fatalf("change %s delivered beyond the bound", c.Path)
	default:
	}
	// Drained (the pump is idle once the queue is empty): offer delivers
	// directly again, before it returns.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		idle := !s.pumping && s.pending == 0
		s.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pump never went idle")
		}
		time.Sleep(time.Millisecond)
	}
	// Delivered: the subscriber let go of the batch; publish's own
	// reference is the last.
	if n := first.refs.Load(); n != 1 {
		t.Fatalf("batch still has %d references after delivery, want 1 (the publisher's)", n)
	}
	first.release()
	if lost := s.offer(newBatch(changesN(5000, 3))); lost != 0 {
		t.Fatalf("lost %d of 3 offered to an empty subscriber", lost)
	}
	for i := range 3 {
		select {
		case c := <-s.ch:
			if c.Path != strconv.Itoa(5000+i) {
				t.Fatalf("got %s, want %d", c.Path, 5000+i)
			}
		default:
			t.Fatalf("change %d not in the channel when offer returned", 5000+i)
		}
	}
}

// The queue holds only what waits: a subscription of 65,536 that never
// had a burst holds no queue, and its channel is the handoff's size; a
// burst two subscribers wait on is held once, by both.
func TestSubscriber_MemoryFollowsWhatWaits(t *testing.T) {
	a, b := newSubscriber(65536, "full"), newSubscriber(65536, "full")
	defer a.close()
	defer b.close()
	if cap(a.ch) != handoff || a.batches != nil {
		t.Fatalf("channel room %d, queue %v; want %d and none", cap(a.ch), a.batches, handoff)
	}
	// Two subscribers without their pumps, so nothing drains: the channel
	// takes the first handoff changes, the queue the rest.
	newIdle := func() *subscriber {
		return &subscriber{ch: make(chan Change, handoff), limit: 65536 - handoff, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	}
	a, b = newIdle(), newIdle()
	batch := newBatch(changesN(0, 1000))
	a.offer(batch)
	b.offer(batch)
	if len(a.batches) != 1 || len(b.batches) != 1 || &a.batches[0].cs[0] != &batch.c[handoff] || &b.batches[0].cs[0] != &batch.c[handoff] {
		t.Fatal("the two subscribers do not share the published batch")
	}
	if n := batch.refs.Load(); n != 3 {
		t.Fatalf("batch has %d references, want 3 (the publisher and two queued parts)", n)
	}
}

// TestEngine_SubscribeFunc_OnlyWantedChanges: a filtered subscriber gets
// the changes of the paths it wants, in order, and nothing else; an
// unfiltered one still gets every change.
func TestEngine_SubscribeFunc_OnlyWantedChanges(t *testing.T) {
	drv := &pushDriver{fakeDriver: newFake(), ready: make(chan struct{})}
	e, err := New(Config{}, map[string]device.Driver{"ua": drv}, []Tag{
		{Path: "A", Device: "ua", Point: device.Point{Address: "a", Type: value.Float64}},
		{Path: "B", Device: "ua", Point: device.Point{Address: "b", Type: value.Float64}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wantB atomic.Bool
	onlyB, _, cancelB := e.SubscribeFunc(16, func(p string) bool { return wantB.Load() && p == "B" })
	defer cancelB()
	all, _, cancelAll := e.Subscribe(16)
	defer cancelAll()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	<-drv.ready
	now := time.Now()
	drv.fn(1, value.VQT{Value: 1.0, Quality: value.Good, Time: now}) // not wanted yet
	wantB.Store(true)
	drv.fn(0, value.VQT{Value: 2.0, Quality: value.Good, Time: now})
	drv.fn(1, value.VQT{Value: 3.0, Quality: value.Good, Time: now})
	drv.fn(0, value.VQT{Value: 4.0, Quality: value.Good, Time: now})
	drv.fn(1, value.VQT{Value: 5.0, Quality: value.Good, Time: now})
	for _, w := range []float64{3, 5} {
		if c := <-onlyB; c.Path != "B" || c.Value != w {
			t.Fatalf("filtered subscriber got %s=%v, want B=%v", c.Path, c.Value, w)
		}
	}
	select {
	case c := <-onlyB:
		t.Fatalf("filtered subscriber got an unwanted change %s=%v", c.Path, c.Value)
	default:
	}
	for _, w := range []float64{1, 2, 3, 4, 5} {
		if c := <-all; c.Value != w {
			t.Fatalf("unfiltered subscriber got %s=%v, want %v", c.Path, c.Value, w)
		}
	}
}
