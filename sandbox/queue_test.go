package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
)

const queueModule = `
def block(args):
    return system.tag.read(["Block"])[0].quality

def mark(args):
    return system.tag.write(["Order"], [args])[0]
`

func principal(name string) auth.Grant {
	g := full
	g.Principal = name
	return g
}

// waitQueued waits until the pool holds n waiting runs.
func waitQueued(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Health().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d runs queued: %+v", n, p.Health())
		}
		time.Sleep(time.Millisecond)
	}
}

// marks returns the args of the Order writes, in the order they ran.
func marks(svc *fakeServices) []string {
	var out []string
	for _, c := range svc.callsOf("tag.write") {
		var p struct {
			Values []string `json:"values"`
		}
		_ = json.Unmarshal([]byte(c.Params), &p)
		out = append(out, strings.Join(p.Values, ","))
	}
	return out
}

// TestPool_Queue_FairBetweenPrincipals: one principal flooding runs
// cannot starve another (issue 11, "Fair queueing"): B's single run, queued
// after A's eight, starts before A's second waiting run.
func TestPool_Queue_FairBetweenPrincipals(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1
	svc := newFakeServices()
	p := startPool(t, cfg, svc)
	load(t, p, "m", queueModule)
	a, b := principal("flooder"), principal("other")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	start := func(g auth.Grant, entry, arg string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := run(t, p, g, "m", entry, arg)
			errs <- err
		}()
	}
	start(a, "block", "null")
	<-svc.blocked // the only worker is busy with A's run
	for i := range 8 {
		start(a, "mark", fmt.Sprintf(`"A%d"`, i))
		waitQueued(t, p, i+1)
	}
	start(b, "mark", `"B"`)
	waitQueued(t, p, 9)
	close(svc.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("run: %v", err)
		}
	}
	got := marks(svc)
	// A0 was already handed to the worker's slot when B arrived; B runs
	// next, then the rest of A's, in their order.
	want := []string{"A0", "B", "A1", "A2", "A3", "A4", "A5", "A6", "A7"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestPool_Queue_FullQueueMakesRoomForOthers: when the flooder has filled
// the queue, another principal's run still gets in; the flooder's newest
// waiting run answers busy, saying why, and the flooder's own next run is
// refused.
func TestPool_Queue_FullQueueMakesRoomForOthers(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 1
	cfg.Queue = 3
	svc := newFakeServices()
	p := startPool(t, cfg, svc)
	load(t, p, "m", queueModule)
	a, b := principal("flooder"), principal("other")
	type res struct {
		arg string
		err error
	}
	results := make(chan res, 10)
	var wg sync.WaitGroup
	start := func(g auth.Grant, entry, arg string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := run(t, p, g, "m", entry, arg)
			results <- res{arg, err}
		}()
	}
	start(a, "block", "null")
	<-svc.blocked
	for i := range 3 {
		start(a, "mark", fmt.Sprintf(`"A%d"`, i))
		waitQueued(t, p, i+1)
	}
	start(b, "mark", `"B"`) // the queue is full: A2 makes room
	r := <-results
	if r.arg != `"A2"` || KindOf(r.err) != KindBusy || !strings.Contains(r.err.Error(), "gave its place") {
		t.Fatalf("evicted %s: %v; want A2 busy, giving its place", r.arg, r.err)
	}
	waitQueued(t, p, 3)
	_, err := run(t, p, a, "m", "mark", `"A3"`)
	if KindOf(err) != KindBusy || !strings.Contains(err.Error(), "waiting") {
		t.Fatalf("the flooder's next run: %v, want busy", err)
	}
	close(svc.release)
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Errorf("run %s: %v", r.arg, r.err)
		}
	}
	if got, want := marks(svc), []string{"A0", "B", "A1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestPool_Queue_FlowShareKeepsWorkersForScripts: node runs use at most
// python.flow_workers workers; a second flow's node run waits while a
// gateway script run takes the other worker at once.
func TestPool_Queue_FlowShareKeepsWorkersForScripts(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 2
	cfg.FlowWorkers = 1
	svc := newFakeServices()
	p := startPool(t, cfg, svc)
	load(t, p, "m", queueModule)
	busyFlow := make(chan error, 1)
	go func() {
		_, err := p.RunNodes(context.Background(), principal("flow:a"), "m", "block", []json.RawMessage{[]byte("null")}, 30*time.Second)
		busyFlow <- err
	}()
	<-svc.blocked // flow a holds the flows' one worker
	second := make(chan []NodeItem, 1)
	go func() {
		items, err := p.RunNodes(context.Background(), principal("flow:b"), "m", "mark", []json.RawMessage{[]byte(`"F"`)}, 30*time.Second)
		if err != nil {
			t.Errorf("flow b: %v", err)
		}
		second <- items
	}()
	waitQueued(t, p, 1)
	// A gateway script run is not held up by the flows: the second worker
	// is free for it.
	if got := mustRun(t, p, principal("rest"), "m", "mark", `"R"`); got != `"Good"` {
		t.Fatalf("script run: %s", got)
	}
	if h := p.Health(); h.Queued != 1 {
		t.Errorf("flow b's run should still wait for the flows' worker: %+v", h)
	}
	close(svc.release)
	if err := <-busyFlow; err != nil {
		t.Fatal(err)
	}
	items := <-second
	if len(items) != 1 || string(items[0].Result) != `"Good"` {
		t.Fatalf("flow b: %+v", items)
	}
	if got, want := marks(svc), []string{"R", "F"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestPool_RunNodes_PerMessageOutcomes: one batch, one outcome per message
// in order: a value, an exception with its line, a value that is not JSON,
// None; a message past its timeout stops the batch there (the worker is
// replaced) and the ones after it are not started.
func TestPool_RunNodes_PerMessageOutcomes(t *testing.T) {
	cfg := testConfig(t)
	p := startPool(t, cfg, newFakeServices())
	load(t, p, "node", `
def transform(msg):
    if msg == "raise":
        raise ValueError("bad input")
    if msg == "fn":
        return len
    if msg == "none":
        return None
    if msg == "spin":
        while True:
            pass
    print("seen", msg)
    return {"payload": msg}
`)
	msgs := func(ss ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(ss))
		for i, s := range ss {
			out[i] = json.RawMessage(`"` + s + `"`)
		}
		return out
	}
	items, err := p.RunNodes(context.Background(), full, "node", "transform", msgs("a", "raise", "fn", "none", "b"), 5*time.Second)
	if err != nil || len(items) != 5 {
		t.Fatalf("items %+v, err %v", items, err)
	}
	if string(items[0].Result) != `{"payload":"a"}` || len(items[0].Logs) != 1 || items[0].Logs[0].Msg != "seen a" {
		t.Errorf("item 0: %+v", items[0])
	}
	if e := items[1].Err; e == nil || e.Kind != KindScriptError || !strings.Contains(e.Detail, "ValueError: bad input") || e.Line != 4 {
		t.Errorf("item 1: %+v, want ValueError at line 4", e)
	}
	if e := items[2].Err; e == nil || e.Kind != KindBadResult || !strings.Contains(e.Detail, "not JSON") {
		t.Errorf("item 2: %+v, want bad_result", e)
	}
	if string(items[3].Result) != "null" || items[3].Err != nil {
		t.Errorf("item 3: %+v", items[3])
	}
	if string(items[4].Result) != `{"payload":"b"}` {
		t.Errorf("item 4: %+v", items[4])
	}

	start := time.Now()
	items, err = p.RunNodes(context.Background(), full, "node", "transform", msgs("a", "spin", "b"), 300*time.Millisecond)
	if err != nil || len(items) != 2 {
		t.Fatalf("items %+v, err %v; want 2 (the spin stops the batch)", items, err)
	}
	if e := items[1].Err; e == nil || e.Kind != KindTimeout {
		t.Errorf("item 1: %+v, want timeout", items[1])
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timed out after %v", d)
	}
	waitWorkers(t, p, cfg.Replicas)
	items, err = p.RunNodes(context.Background(), full, "node", "transform", msgs("b"), time.Second)
	if err != nil || len(items) != 1 || string(items[0].Result) != `{"payload":"b"}` {
		t.Fatalf("after the timeout: %+v %v", items, err)
	}
}

// TestPool_RunNodes_ModuleFailure_IsTheCallsError: a node whose module
// fails when it loads ran no message: the call's error says why.
func TestPool_RunNodes_ModuleFailure_IsTheCallsError(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "broken", "x = 1 / 0\n\ndef transform(msg):\n    return msg\n")
	items, err := p.RunNodes(context.Background(), full, "broken", "transform", []json.RawMessage{[]byte("1"), []byte("2")}, time.Second)
	if re := runErrOf(t, err); re.Kind != KindScriptError || !strings.Contains(re.Detail, "ZeroDivisionError") || items != nil {
		t.Fatalf("items %+v, err %+v", items, re)
	}
	if _, err := p.RunNodes(context.Background(), full, "broken", "transform", nil, time.Second); KindOf(err) != KindInvalid {
		t.Errorf("no messages: %v, want invalid", err)
	}
}
