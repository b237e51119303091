package sandbox

import (
	"context"
	"time"
)

// The warm-up: the daemon starts the pool in the background (it is ready
// once its API listens and its tags scan; docs/appliance.md, Readiness),
// so a run, a check or a lint that arrives while Start is still at work
// waits for it, each at most its own timeout, instead of failing with
// runtime_missing; and the runs also wait for the holds (Hold) of what
// must be in place first.

// Hold makes runs wait (each at most its timeout, as for a free worker)
// until release is called; checks and lints do not wait for it. The
// service holds the runs while it installs the project's script files
// after Start, so that no run sees an older version of a module. release
// may be called more than once.
func (p *Pool) Hold() (release func()) {
	p.holdMu.Lock()
	if p.holds == 0 {
		p.holdC = make(chan struct{})
	}
	p.holds++
	p.holdMu.Unlock()
	released := false
	return func() {
		p.holdMu.Lock()
		defer p.holdMu.Unlock()
		if released {
			return
		}
		released = true
		p.holds--
		if p.holds == 0 {
			close(p.holdC)
			p.holdC = nil
		}
	}
}

// StartBackground is Start in a goroutine of its own: from its return on,
// the pool is starting (health says so; runs, checks and lints wait for
// it). The channel receives Start's error (nil, or why it could not
// start at all) and is then closed.
func (p *Pool) StartBackground(ctx context.Context) <-chan error {
	out := make(chan error, 1)
	if err := p.begin(); err != nil {
		out <- err
		close(out)
		return out
	}
	go func() {
		out <- p.start(ctx)
		close(out)
	}()
	return out
}

// AwaitStart waits, while ctx lasts and at most as long as a worker's
// start may take, for a Start under way to return: what needs the
// runtime itself (the package manager) asks after it.
func (p *Pool) AwaitStart(ctx context.Context) { p.awaitWarm(ctx, p.startTimeout, false) }

// Starting reports whether Start was called and has not returned yet.
func (p *Pool) Starting() bool {
	p.mu.RLock()
	started := p.started
	p.mu.RUnlock()
	return started && !p.startReturned()
}

func (p *Pool) startReturned() bool {
	select {
	case <-p.startDone:
		return true
	default:
		return false
	}
}

// awaitWarm waits, at most limit and while ctx lasts, for a Start under
// way to return and, for a run (runs), for the holds to be released. A
// pool never started does not wait (its calls fail with runtime_missing).
func (p *Pool) awaitWarm(ctx context.Context, limit time.Duration, runs bool) {
	var hold chan struct{}
	if runs {
		p.holdMu.Lock()
		hold = p.holdC
		p.holdMu.Unlock()
	}
	starting := p.Starting()
	if (!starting && hold == nil) || limit <= 0 {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	if starting {
		select {
		case <-p.startDone:
		case <-ctx.Done():
			return
		case <-t.C:
			return
		}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// runWait is how long a run of module's entry may wait for the warm-up:
// timeout when given, else the entry's own, else (a module or entry not
// known yet: the warm-up may be installing it) python.gateway_timeout's
// default.
func (p *Pool) runWait(module, entry string, timeout time.Duration) time.Duration {
	if timeout > 0 {
		return timeout
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if m := p.modules[module]; m != nil {
		if d, ok := m.entries[entry]; ok {
			return d
		}
	}
	return p.cfg.GatewayTimeout.Default
}

// held reports whether runs are held (Hold).
func (p *Pool) held() bool {
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	return p.holds > 0
}
