package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"qubiq.dev/edge/auth"
)

// nestingServices serves script.runOnGateway by running the entry named on
// the pool, as the service layer does, with the call's context.
type nestingServices struct {
	p    atomic.Pointer[Pool]
	errs chan error // the nested runs' errors, as the pool answered them
}

func (n *nestingServices) Call(ctx context.Context, g auth.Grant, method string, params json.RawMessage) (json.RawMessage, error) {
	if method != "script.runOnGateway" {
		return nil, errors.New("unexpected " + method)
	}
	var req struct {
		Entry string          `json:"entry"`
		Args  json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, err
	}
	mod, entry, _ := strings.Cut(req.Entry, ".")
	res, err := n.p.Load().Run(ctx, g, mod, entry, req.Args)
	if err != nil {
		n.errs <- err
		return nil, err
	}
	return res.Result, nil
}

// TestPool_NestedRun_AllWorkersHeldByItsCallers: with 2 workers, a run
// calling a run calling a run needs a third worker that only its own
// callers could free: it is refused at once as busy, naming
// python.replicas, instead of waiting for the callers' timeout; one level
// of nesting, which has a worker, runs.
func TestPool_NestedRun_AllWorkersHeldByItsCallers(t *testing.T) {
	cfg := testConfig(t)
	cfg.Replicas = 2
	svc := &nestingServices{errs: make(chan error, 4)}
	p := startPool(t, cfg, svc)
	svc.p.Store(p)
	load(t, p, "m", `
def leaf(args):
    return "leaf"

def one(args):
    return system.script.runOnGateway("m.leaf")

@gateway(timeout_ms=60000)
def two(args):
    try:
        return system.script.runOnGateway("m.one")
    except Exception as e:
        return "refused: %s" % e
`)
	if got := mustRun(t, p, full, "m", "one", "null"); got != `"leaf"` {
		t.Errorf("one level of nesting: %s, want the leaf's result", got)
	}
	got := mustRun(t, p, full, "m", "two", "null")
	if !strings.Contains(got, "refused") {
		t.Fatalf("two levels with two workers: %s, want the innermost run refused", got)
	}
	select {
	case err := <-svc.errs:
		var re *RunError
		if !errors.As(err, &re) || re.Kind != KindBusy || !strings.Contains(err.Error(), "python.replicas") {
			t.Errorf("the refusal: %v, want kind busy naming python.replicas", err)
		}
	default:
		t.Error("the nested run was not refused by the pool")
	}
}
