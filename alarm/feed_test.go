package alarm

import (
	"context"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// countingSource is a fakeSource that counts its live subscriptions.
type countingSource struct {
	fakeSource
	smu  sync.Mutex
	live int
}

func (c *countingSource) Subscribe(buf int, want func(string) bool) (<-chan Change, func() uint64, func()) {
	c.smu.Lock()
	c.live++
	c.smu.Unlock()
	var once sync.Once
	return c.ch, c.dropped.Load, func() {
		once.Do(func() {
			c.smu.Lock()
			c.live--
			c.smu.Unlock()
		})
	}
}

func (c *countingSource) subscriptions() int {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.live
}

func TestFeed_SubscribedOnlyWhileAlarmsAreDefined(t *testing.T) {
	src := &countingSource{fakeSource: fakeSource{ch: make(chan Change, 16), cur: map[string]value.VQT{}}}
	src.setCurrent("Line1/Tank/Level", value.VQT{Value: 50.0, Quality: value.Good, Time: time.Now()})
	e, err := New(Options{Source: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	if n := src.subscriptions(); n != 0 {
		t.Fatalf("no alarm defined, yet %d subscriptions to the tag changes", n)
	}
	insts, _ := parseDefs(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	e.SetDefinitions(insts)
	if n := src.subscriptions(); n != 1 {
		t.Fatalf("an alarm defined: %d subscriptions, want 1", n)
	}
	src.ch <- Change{Path: "Line1/Tank/Level", VQT: value.VQT{Value: 95.0, Quality: value.Good, Time: time.Now()}}
	waitFor(t, "the alarm to see the change", func() bool { a, _ := e.Get(hiID); return a.State == ActiveUnacked })
	e.SetDefinitions(nil)
	if n := src.subscriptions(); n != 0 {
		t.Fatalf("every alarm removed: %d subscriptions, want 0", n)
	}
	e.SetDefinitions(insts)
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := src.subscriptions(); n != 0 {
		t.Fatalf("stopped: %d subscriptions, want 0", n)
	}
}
