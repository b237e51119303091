package sandbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestPool_Hold_RunWaitsForTheWarmUp: a run that arrives before the pool
// started and while the service holds the runs waits (within its
// timeout) instead of failing with runtime_missing, and runs once the hold
// is released; a check does not wait for the hold.
func TestPool_Hold_RunWaitsForTheWarmUp(t *testing.T) {
	p, err := New(testConfig(t), newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	code := "def echo(args):\n    return args\n"
	p.SetModule("echo", code, ModuleInfo{Entries: []Entry{{Name: "echo", TimeoutMs: 30000}}}, 1)
	release := p.Hold()
	type result struct {
		res RunResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		r, err := p.Run(context.Background(), full, "echo", "echo", json.RawMessage(`7`))
		ran <- result{r, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if _, err := p.Check(ctx, "other", code); err != nil {
		t.Fatalf("a check while the runs are held: %v", err)
	}
	select {
	case r := <-ran:
		t.Fatalf("the run did not wait for the hold: %+v %v", r.res, r.err)
	default:
	}
	release()
	release() // twice is once
	r := <-ran
	if r.err != nil || string(r.res.Result) != "7" {
		t.Fatalf("the held run: %s %v, want 7", r.res.Result, r.err)
	}
	if p.Starting() {
		t.Error("Starting after Start returned")
	}
}

// TestPool_NotStarted_RunFailsAtOnce: a pool whose Start was never called
// does not wait: the run fails with runtime_missing.
func TestPool_NotStarted_RunFailsAtOnce(t *testing.T) {
	p, err := New(testConfig(t), newFakeServices(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	p.SetModule("echo", "def echo(args):\n    return args\n", ModuleInfo{Entries: []Entry{{Name: "echo", TimeoutMs: 30000}}}, 1)
	if _, err := p.Run(context.Background(), full, "echo", "echo", nil); KindOf(err) != KindRuntimeMissing {
		t.Fatalf("run on a pool never started: %v, want runtime_missing", err)
	}
	if h := p.Health(); h.Python.Status != "missing" {
		t.Errorf("health %+v", h.Python)
	}
}
