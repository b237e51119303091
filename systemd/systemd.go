// Package systemd is the daemon's glue to systemd: readiness, status and
// stopping notifications (sd_notify), and a watchdog that pings only while
// the daemon proves progress (DESIGN.md, hard-won rules: "The watchdog
// proves progress"). Off systemd (no NOTIFY_SOCKET) every call is a no-op.
// The unit file qubiqd.service lives beside this file and is packaged from
// here.
//
// It uses github.com/coreos/go-systemd/v22/daemon and imports nothing of the
// project.
package systemd

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Ready tells systemd that start-up finished (READY=1). It reports whether a
// notification was sent.
func Ready() bool { return notify(daemon.SdNotifyReady) }

// Stopping tells systemd that the daemon is shutting down (STOPPING=1).
func Stopping() bool { return notify(daemon.SdNotifyStopping) }

// Status sets the one-line status systemctl shows (STATUS=...).
func Status(s string) bool { return notify("STATUS=" + s) }

func notify(state string) bool {
	ok, err := daemon.SdNotify(false, state)
	return ok && err == nil
}

// Watchdog pings WATCHDOG=1 at half the interval systemd asked for
// (WatchdogSec=), but only while alive returns nil: alive checks that the
// scan loops and the API made progress recently. When alive fails the ping
// is withheld and the reason logged, so systemd restarts a stuck daemon
// instead of a ticker hiding a deadlock. It returns when ctx ends, or at once
// when no watchdog is configured.
func Watchdog(ctx context.Context, alive func(maxAge time.Duration) error, log *slog.Logger) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := alive(interval); err != nil {
				log.Error("watchdog ping withheld: no progress", slog.Any("err", err))
				continue
			}
			notify(daemon.SdNotifyWatchdog)
		}
	}
}
