package systemd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The notification states of sd_notify(3).
const (
	StateReady    = "READY=1"
	StateStopping = "STOPPING=1"
	StateWatchdog = "WATCHDOG=1"
	StateReload   = "RELOADING=1"
)

// ErrNoSocket is returned by Notify when $NOTIFY_SOCKET is not set: the
// process does not run under systemd's notify protocol.
var ErrNoSocket = errors.New("NOTIFY_SOCKET not set")

// Notify sends the given states ("READY=1", "STATUS=text", ...) as one
// datagram to $NOTIFY_SOCKET, the protocol of sd_notify(3): a path, or an
// abstract socket when it starts with "@". States are joined with newlines;
// a state must not itself contain one (STATUS= text has its newlines
// replaced by spaces by Status).
//
// It returns ErrNoSocket off systemd, and an error naming the socket when
// the datagram cannot be sent. Only AF_UNIX sockets are supported (not the
// vsock: form of virtual machines).
func Notify(states ...string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return ErrNoSocket
	}
	if strings.HasPrefix(addr, "vsock:") {
		return fmt.Errorf("systemd: NOTIFY_SOCKET %q: vsock is not supported", addr)
	}
	name := addr
	if strings.HasPrefix(addr, "@") {
		name = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("systemd: notify %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte(strings.Join(states, "\n"))); err != nil {
		return fmt.Errorf("systemd: notify %s: %w", addr, err)
	}
	return nil
}

func notify(states ...string) bool { return Notify(states...) == nil }

// Ready tells systemd that start-up finished (READY=1): for qubiqd, once the
// store, the drivers and the API listener are up. With Type=notify systemd
// holds units ordered after qubiqd until then. It reports whether the
// notification was sent.
func Ready() bool { return notify(StateReady) }

// ReadyStatus is Ready and Status in one datagram.
func ReadyStatus(status string) bool { return notify(StateReady, statusState(status)) }

// Stopping tells systemd that the daemon is shutting down (STOPPING=1).
func Stopping() bool { return notify(StateStopping) }

// Status sets the one-line status `systemctl status qubiqd` shows
// (STATUS=...); newlines in s become spaces.
func Status(s string) bool { return notify(statusState(s)) }

func statusState(s string) string {
	return "STATUS=" + strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// WatchdogInterval returns the interval systemd expects pings within
// (WatchdogSec=, passed as $WATCHDOG_USEC), or 0 when no watchdog is set
// for this process: the variable is absent, not a positive integer, or
// $WATCHDOG_PID names another process (sd_watchdog_enabled(3)).
func WatchdogInterval() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" {
		if pid, err := strconv.Atoi(p); err != nil || pid != os.Getpid() {
			return 0
		}
	}
	return time.Duration(usec) * time.Microsecond
}
