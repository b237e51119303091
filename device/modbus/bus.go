package modbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"qubiq.dev/edge/value"
)

// conn is an open Modbus TCP connection, RTU-over-TCP socket or serial port.
type conn interface {
	io.ReadWriter
	SetDeadline(time.Time) error
	Close() error
}

// flusher is a conn whose pending input can be discarded (RTU framing).
type flusher interface {
	flush() (int, error)
}

// rtuSocket is an RTU-over-TCP connection: a TCP socket whose pending input
// settle can discard.
type rtuSocket struct{ net.Conn }

func (s rtuSocket) flush() (int, error) { return flushSocket(s.Conn) }

// bus is one wire to devices. A Modbus TCP device has a bus of its own (a
// gateway or PLC serves each TCP connection on its own); a serial port and
// an RTU-over-TCP endpoint are one bus shared by every Driver whose url
// names it, because a serial line carries one transaction at a time
// (Modbus over Serial Line V1.02 §2.1) and serial-to-Ethernet gateways
// often take one TCP connection only. sem allows one request in flight on
// the bus; requests of the Drivers on it queue there in arrival order.
type bus struct {
	ep         endpoint
	cfg        Config        // the line settings the bus was opened with
	t35        time.Duration // RTU inter-frame silence; 0 on TCP transports
	key        string        // the shared-bus registry key; "" for a private bus
	sem        chan struct{}
	backoffMin time.Duration
	backoffMax time.Duration

	// Owned by the holder of sem.
	failures int       // consecutive failed dials or opens
	retryAt  time.Time // no dial before this
	dialErr  error     // the last failed dial
	quietAt  time.Time // RTU: no request before this (t3.5 after the last frame)

	mu     sync.Mutex // guards c, refs, closed
	c      conn
	refs   int
	closed bool
}

var (
	busesMu sync.Mutex
	buses   = map[string]*bus{} // shared buses by endpoint key
)

// acquireBus returns the bus for ep: a new private one for Modbus TCP (or an
// endpoint that did not parse), the shared one for an RTU endpoint, made on
// first use. The error reports a shared serial bus that another device
// already uses with other line settings; the bus is returned anyway, so that
// release balances. Nothing is dialled or opened here.
func acquireBus(ep endpoint, c Config) (*bus, error) {
	newBus := func(key string) *bus {
		b := &bus{ep: ep, cfg: c, key: key, sem: make(chan struct{}, 1), refs: 1,
			backoffMin: backoffStart, backoffMax: backoffCap}
		switch ep.kind {
		case kindRTU:
			b.t35 = interFrame(c.Baud, 1+c.DataBits+parityBits(c.Parity)+c.StopBits)
		case kindRTUOverTCP:
			// The gateway times the serial line; the socket needs no silence.
		}
		return b
	}
	if ep.kind == kindTCP || ep.addr == "" {
		return newBus(""), nil
	}
	key := ep.key()
	busesMu.Lock()
	defer busesMu.Unlock()
	b := buses[key]
	if b == nil {
		b = newBus(key)
		buses[key] = b
		return b, nil
	}
	b.mu.Lock()
	b.refs++
	b.mu.Unlock()
	if ep.kind == kindRTU && !sameLine(b.cfg, c) {
		return b, fmt.Errorf("serial port %s is shared with a device set to %s; every device on one bus needs the same baud, parity, data_bits and stop_bits (this one: %s)",
			ep.addr, lineString(b.cfg), lineString(c))
	}
	return b, nil
}

func parityBits(p string) int {
	if p == "N" {
		return 0
	}
	return 1
}

func sameLine(a, b Config) bool {
	return a.Baud == b.Baud && a.Parity == b.Parity && a.DataBits == b.DataBits && a.StopBits == b.StopBits
}

func lineString(c Config) string {
	return fmt.Sprintf("%d %d%s%d", c.Baud, c.DataBits, c.Parity, c.StopBits)
}

// release drops one user of b; the last one closes its connection or port
// (aborting a request in flight) and removes a shared bus from the registry.
func (b *bus) release() error {
	if b.key != "" {
		busesMu.Lock()
		defer busesMu.Unlock()
	}
	b.mu.Lock()
	b.refs--
	last := b.refs <= 0
	var c conn
	if last {
		c, b.c, b.closed = b.c, nil, true
	}
	b.mu.Unlock()
	if !last {
		return nil
	}
	if b.key != "" && buses[b.key] == b {
		delete(buses, b.key)
	}
	if c != nil {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	return nil
}

// current returns the open connection, or nil.
func (b *bus) current() conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c
}

// connect returns the open connection or dials one (opens the port). While
// a failed dial's backoff runs it fails at once with Bad_NotConnected. The
// caller holds sem. fresh reports a connection dialled (opened) by this
// call.
func (b *bus) connect(ctx context.Context, timeout time.Duration, log *slog.Logger) (c conn, fresh bool, _ *reqError) {
	b.mu.Lock()
	c, closed := b.c, b.closed
	b.mu.Unlock()
	if closed {
		return nil, false, &reqError{q: value.BadNotConnected, reason: "driver closed", err: errClosed}
	}
	if c != nil {
		return c, false, nil
	}
	if time.Now().Before(b.retryAt) {
		// The reason is the same as the failed dial's, with no countdown: a
		// reason that changes at every scan would make every scan a new VQT
		// (new timestamp, a change on every subscription) and show a
		// countdown frozen at whatever the last change said.
		return nil, false, &reqError{q: value.BadNotConnected, err: b.dialErr, reason: "not connected: " + b.dialErr.Error()}
	}
	var err error
	switch b.ep.kind {
	case kindRTU:
		c, err = openSerial(b.ep.addr, b.cfg)
	default:
		d := net.Dialer{Timeout: timeout}
		var nc net.Conn
		nc, err = d.DialContext(ctx, "tcp", b.ep.addr)
		if err == nil {
			c = nc
			if b.ep.kind == kindRTUOverTCP {
				c = rtuSocket{nc}
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctxError(ctx, false)
		}
		b.failures++
		b.dialErr = err
		b.retryAt = time.Now().Add(backoff(b.failures, b.backoffMin, b.backoffMax))
		if b.failures == 1 {
			log.Warn("modbus: connect failed; retrying with backoff", slog.String("addr", b.ep.key()), slog.Any("err", err))
		}
		return nil, false, &reqError{q: value.BadNotConnected, reason: "not connected: " + err.Error(), err: err}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = c.Close() // raced with the last release: nothing was sent on c
		return nil, false, &reqError{q: value.BadNotConnected, reason: "driver closed", err: errClosed}
	}
	b.c = c
	b.mu.Unlock()
	if b.failures > 0 {
		log.Info("modbus: connected", slog.String("addr", b.ep.key()), slog.Int("failed_attempts", b.failures))
	}
	b.failures = 0
	b.quietAt = time.Now().Add(b.t35)
	return c, true, nil
}

// drop closes c after a failed request so that nothing left in it (a late
// answer) is read as the answer to a later request, and so that the next
// request dials (opens the port) again.
func (b *bus) drop(c conn, cause error, log *slog.Logger) {
	b.mu.Lock()
	if b.c == c {
		b.c = nil
	}
	b.mu.Unlock()
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Debug("modbus: close after failed request", slog.Any("err", err))
	}
	log.Debug("modbus: connection dropped after failed request", slog.Any("cause", cause))
}

// settle prepares an RTU bus for a request: it waits until t3.5 has passed
// since the last frame (Modbus over Serial Line V1.02 §2.5.1.1), then
// discards any input waiting (a late answer, line noise, the tail of a
// frame that failed its checks) and, while input keeps coming, waits t3.5
// (2 ms at least) and discards again, until the line is quiet or deadline
// passes. The caller holds sem.
func (b *bus) settle(ctx context.Context, c conn, deadline time.Time, log *slog.Logger) *reqError {
	if err := sleepCtx(ctx, time.Until(b.quietAt)); err != nil {
		return ctxError(ctx, false)
	}
	f, ok := c.(flusher)
	if !ok {
		return nil
	}
	gap := max(b.t35, 2*time.Millisecond)
	for {
		n, err := f.flush()
		if err != nil {
			b.drop(c, err, log)
			return classify(ctx, err, false)
		}
		if n == 0 {
			return nil
		}
		log.Debug("modbus: discarded stray input before a request", slog.String("bus", b.ep.key()), slog.Int("bytes", n))
		if time.Now().Add(gap).After(deadline) {
			return &reqError{q: value.BadCommunicationError, reason: "bus busy: input keeps arriving, no silence to send in",
				err: errBusBusy}
		}
		if err := sleepCtx(ctx, gap); err != nil {
			return ctxError(ctx, false)
		}
	}
}

// errBusBusy is wrapped by the failure of a request that found an RTU line
// never quiet for t3.5 before its deadline (another master, or noise).
var errBusBusy = errors.New("bus busy")
