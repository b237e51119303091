package daemon

import (
	"context"
	"fmt"
	"log/slog"
)

// part is one piece of the running daemon: started in order, stopped in
// reverse. stop may be nil (nothing to undo).
type part struct {
	name  string
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

// lifecycle starts parts in order and remembers the started ones, so they
// stop in reverse, once, and a part that fails to start stops every part
// started before it (like caddy's apps: the started ones are stopped when
// a later one fails).
type lifecycle struct {
	log     *slog.Logger
	started []part
}

// start starts parts in order after those already started. When one fails,
// every started part (of this call and the earlier ones) is stopped in
// reverse, and the error names the part that failed.
func (l *lifecycle) start(ctx context.Context, parts ...part) error {
	for _, p := range parts {
		if err := p.start(ctx); err != nil {
			l.stop(context.WithoutCancel(ctx))
			return fmt.Errorf("start %s: %w", p.name, err)
		}
		l.started = append(l.started, p)
	}
	return nil
}

// stop stops the started parts in reverse order; each runs once even when
// stop is called again. A part that fails to stop is logged; the others
// still stop.
func (l *lifecycle) stop(ctx context.Context) {
	for i := len(l.started) - 1; i >= 0; i-- {
		p := l.started[i]
		l.started = l.started[:i]
		if p.stop == nil {
			continue
		}
		if err := p.stop(ctx); err != nil {
			l.log.Error("stop "+p.name, slog.Any("err", err))
		}
	}
}
