// Package systemd is the daemon's glue to systemd and the unit file it runs
// under:
//
//   - sd_notify (notify.go): READY=1, STATUS=, STOPPING=1 and WATCHDOG=1 over
//     $NOTIFY_SOCKET, written with the standard library after sd_notify(3)
//     (https://www.freedesktop.org/software/systemd/man/sd_notify.html).
//     Off systemd (no NOTIFY_SOCKET) every call is a no-op.
//   - Watchdog (watchdog.go): pings WATCHDOG=1 at half of WatchdogSec= only
//     while every registered progress source (the scan loops, the API)
//     shows progress, so a wedged tag engine gets the daemon restarted
//     instead of a plain ticker hiding the deadlock.
//   - a log/slog handler (journal.go) that writes to the journal with
//     priorities and structured fields (github.com/coreos/go-systemd/v22/
//     journal), falling back to text on stderr, with a level changeable at
//     run time (slog.LevelVar).
//   - the unit qubiqd.service beside this file (packaged from here) and the
//     drop-in that grants serial ports (SerialDropIn).
//
// docs/appliance.md explains the unit's hardening and every allowance it
// keeps. The package imports nothing of the project.
package systemd
