package modbus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/goburrow/modbus"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// Reconnect backoff (docs/modbus.md, device.Driver: capped exponential backoff
// with jitter).
const (
	backoffStart = 100 * time.Millisecond
	backoffCap   = 30 * time.Second
)

// link is how one Driver reaches its devices: its bus (a TCP connection of
// its own, or a serial port or RTU-over-TCP socket it shares with the other
// Drivers on that bus), one request in flight on the bus at a time, its
// timeout and min_interval, and its connection state for health.
//
// It uses goburrow/modbus v0.1.0 for PDU encoding and response parsing (its
// Client over the packager of its TCPClientHandler or RTUClientHandler) but
// not for the socket or the serial port:
//
//   - goburrow's TCP transport keeps the connection open after a read
//     timeout and after a transaction-id mismatch, so a response that
//     arrives after the timeout stays in the socket and every later request
//     reads the answer to the one before ("response transaction id 'N' does
//     not match request 'N+1'", forever; goburrow/modbus#64, docs/modbus.md, "Faults from the field"
//     C08), and its idle-close timer never fires while polls keep coming.
//     On Modbus TCP, link closes the connection after any error but a Modbus
//     exception (a timeout, a frame that fails checkResponse, a short frame,
//     EOF) and dials again on the next request, so a late answer can never
//     be read as the answer to a later request.
//   - goburrow's RTU transport tests the exception bit with `& 0x80` where
//     it means `| 0x80`, and reads whatever has arrived after a fixed sleep
//     (goburrow/modbus#81, docs/modbus.md, fault C09; see readRTUFrame). On RTU,
//     link flushes the input and waits out the inter-frame silence (t3.5)
//     before each request, reads each answer by its length
//     (readRTUFrame), and keeps the port open after a timeout or a bad
//     frame (the next flush drops whatever is left); it reopens the port
//     or socket only after an I/O error.
//
// On every transport link bounds each request by the configured timeout and
// by ctx (a cancelled ctx aborts the I/O at once); dials or opens the port
// with capped exponential backoff and jitter, and while it backs off,
// requests fail at once with Bad_NotConnected instead of waiting; and keeps
// min_interval between the starts of two of its requests.
type link struct {
	bus         *bus
	busErr      error // the shared bus is open with other serial settings
	timeout     time.Duration
	minInterval time.Duration
	log         *slog.Logger

	// Owned by the holder of bus.sem.
	setUnit   func(byte)
	client    modbus.Client
	tr        transport
	lastStart time.Time
	dialled   bool // a connection was made before: the next one is a reconnect
	reading   bool // the request in flight is a read (do's idempotent)

	stats *device.Counters // the Driver's request statistics

	// abortMu guards the cancellation watch (watch): the Done channel of
	// the context watched, the function that ends the watch, and the
	// connection of the request in flight, which a cancellation aborts.
	abortMu  sync.Mutex
	watched  <-chan struct{}
	unwatch  func() bool
	inflight conn

	mu     sync.Mutex // guards closed, state, reason
	closed bool
	state  string
	reason string
}

func newLink(ep endpoint, c Config, log *slog.Logger, stats *device.Counters) *link {
	l := &link{
		stats:       stats,
		timeout:     time.Duration(c.Timeout),
		minInterval: time.Duration(c.MinInterval),
		log:         log,
		state:       "connecting",
	}
	l.bus, l.busErr = acquireBus(ep, c)
	if ep.kind == kindTCP {
		pk := modbus.NewTCPClientHandler(ep.addr) // packager only: MBAP header, transaction ids
		l.setUnit = func(u byte) { pk.SlaveId = u }
		l.client = modbus.NewClient2(pk, &l.tr)
	} else {
		pk := modbus.NewRTUClientHandler(ep.addr) // packager only: address, CRC
		l.setUnit = func(u byte) { pk.SlaveId = u }
		l.client = modbus.NewClient2(pk, &l.tr)
		l.tr.rtu = true
	}
	return l
}

// transport is the modbus.Transporter that link gives goburrow's client: one
// request, one response, on the connection link chose, under the deadline
// link set. sent reports whether any byte of the request went out (a write
// that failed after that may have been applied).
//
// On Modbus TCP the response is read through a small buffered reader of
// the connection, so that a frame that arrived whole is read in one
// system call; what a device sent after the frame stays in that buffer
// for the next read, as it would stay in the socket (and fails that
// read's checks: link then drops the connection and the buffer with it).
// The response lands in resp, reused by every request: what Send returns
// is valid until the next request on the link.
type transport struct {
	conn conn
	rtu  bool // RTU framing (readRTUFrame), else MBAP (readFrame, checkResponse)
	sent bool

	br     *bufio.Reader // Modbus TCP: reads conn (brConn); nil until the first request
	brConn conn
	resp   [maxADUSize]byte
}

// Send writes adu and reads one response frame, verified by checkResponse
// (Modbus TCP) or readRTUFrame (RTU).
func (t *transport) Send(adu []byte) ([]byte, error) {
	t.sent = false
	n, err := t.conn.Write(adu)
	if n > 0 {
		t.sent = true
	}
	if err != nil {
		return nil, err
	}
	if t.rtu {
		return readRTUFrame(t.conn, adu)
	}
	if t.br == nil {
		t.br = bufio.NewReaderSize(t.conn, maxADUSize)
	} else if t.brConn != t.conn {
		t.br.Reset(t.conn) // a new connection: nothing of the old one is read
	}
	t.brConn = t.conn
	resp, err := readFrame(t.br, &t.resp)
	if err != nil {
		return nil, err
	}
	if err := checkResponse(adu, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// reqError is how a failed request reaches the driver: the quality its
// points get, the reason text, and what the breaker and the write path need.
type reqError struct {
	q         value.Quality
	reason    string
	sent      bool // the request went out (a write may have been applied)
	timeout   bool // counts towards the unit's breaker
	exception byte // the Modbus exception code, 0 when none
	err       error
}

func (e *reqError) Error() string { return e.reason }
func (e *reqError) Unwrap() error { return e.err }

var errClosed = errors.New("driver closed")

// do runs fn, one goburrow client call, on the connection for unit, dialling
// first when needed, and returns fn's result copied into dst (appended to
// dst[:0]): fn's result is the link's response buffer, which the next
// request overwrites. A read (idempotent) that fails because the device had
// closed a connection opened earlier (devices close idle connections) is
// tried once more on a new connection; a write is never retried (docs/architecture.md,
// Rules from the field).
func (l *link) do(ctx context.Context, unit byte, idempotent bool, dst []byte, fn func(modbus.Client) ([]byte, error)) ([]byte, *reqError) {
	select {
	case l.bus.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxError(ctx, false)
	}
	defer func() { <-l.bus.sem }()
	l.reading = idempotent
	for attempt := 0; ; attempt++ {
		reused := l.bus.current() != nil
		res, rerr := l.once(ctx, unit, fn)
		if rerr == nil {
			return append(dst[:0], res...), nil
		}
		if !idempotent || attempt > 0 || !reused || !errors.Is(rerr, errPeerClosed) {
			return res, rerr
		}
		l.log.Debug("modbus: connection closed by device; retrying read on a new connection", slog.String("reason", rerr.reason))
	}
}

// once runs one request. The caller holds bus.sem.
func (l *link) once(ctx context.Context, unit byte, fn func(modbus.Client) ([]byte, error)) ([]byte, *reqError) {
	if err := l.waitInterval(ctx); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, false) // nothing sent
	}
	if l.isClosed() {
		return nil, &reqError{q: value.BadNotConnected, reason: "driver closed", err: errClosed}
	}
	if l.busErr != nil {
		l.stats.Observe(device.ErrConfiguration, -1, false)
		return nil, &reqError{q: value.BadConfigurationError, reason: l.busErr.Error(), err: l.busErr}
	}
	nc, fresh, rerr := l.bus.connect(ctx, l.timeout, l.log)
	if rerr != nil {
		if rerr.q == value.BadNotConnected && !errors.Is(rerr, errClosed) {
			l.setState("connecting", rerr.reason)
		}
		l.stats.Observe(device.ErrNotConnected, -1, false)
		return nil, rerr
	}
	l.connected(fresh)
	dl := time.Now().Add(l.timeout)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	// The deadline goes on before the RTU flush: a socket's expired
	// deadline from the previous request would make the flush itself fail
	// as a timeout and drop a healthy connection (rtu+tcp with scan >
	// timeout lost every second poll).
	if err := nc.SetDeadline(dl); err != nil {
		l.bus.drop(nc, err, l.log)
		return nil, classify(ctx, err, false)
	}
	if l.tr.rtu {
		if rerr := l.bus.settle(ctx, nc, dl, l.log); rerr != nil {
			return nil, rerr
		}
	}
	l.watch(ctx)
	l.abortMu.Lock()
	l.inflight = nc
	l.abortMu.Unlock()
	if ctx.Err() != nil {
		// Cancelled before the watch could see the request in flight.
		_ = nc.SetDeadline(abortDeadline)
	}
	l.setUnit(unit)
	l.tr.conn, l.tr.sent = nc, false
	l.lastStart = time.Now()
	res, err := fn(l.client)
	lat := time.Since(l.lastStart)
	l.abortMu.Lock()
	l.inflight = nil // an abort after this point would land on a later request's deadline
	l.abortMu.Unlock()
	sent := l.tr.sent
	l.tr.conn = nil
	if l.tr.rtu {
		l.bus.quietAt = time.Now().Add(l.bus.t35)
	}
	if err == nil {
		l.setState("connected", "")
		l.stats.Observe(device.ErrNone, lat, l.reading)
		return res, nil
	}
	var me *modbus.ModbusError
	if errors.As(err, &me) {
		l.setState("connected", "")
		l.stats.Observe(device.ErrException, lat, l.reading)
		return nil, exceptionError(me.FunctionCode, me.ExceptionCode)
	}
	rerr = classify(ctx, err, sent)
	l.stats.Observe(device.KindOf(rerr.q), lat, l.reading)
	if !l.tr.rtu || (!rerr.timeout && !errors.Is(err, errBadFrame) && ctx.Err() == nil) {
		// Modbus TCP: any failure may leave a late answer in the socket.
		// RTU: only an I/O error means the port or socket is gone; a
		// timeout or a bad frame leaves it usable, and settle flushes
		// what is left before the next request.
		l.bus.drop(nc, err, l.log)
	}
	return nil, rerr
}

// abortDeadline is the past deadline that aborts a connection's I/O.
var abortDeadline = time.Unix(1, 0)

// watch makes a cancellation of ctx abort the I/O of the request in
// flight (inflight), at once: one context.AfterFunc per context whose
// Done channel differs from the last one watched (the scans pass the
// same context every time), not one per request. A context that is never
// cancelled needs none. The caller holds bus.sem.
func (l *link) watch(ctx context.Context) {
	done := ctx.Done()
	l.abortMu.Lock()
	defer l.abortMu.Unlock()
	if done == nil || done == l.watched {
		return
	}
	if l.unwatch != nil {
		l.unwatch()
	}
	l.watched = done
	l.unwatch = context.AfterFunc(ctx, func() {
		l.abortMu.Lock()
		defer l.abortMu.Unlock()
		if l.watched == done && l.inflight != nil {
			_ = l.inflight.SetDeadline(abortDeadline) // abort the I/O; the request fails
		}
	})
}

// waitInterval sleeps until min_interval has passed since the last request
// started.
func (l *link) waitInterval(ctx context.Context) *reqError {
	if l.minInterval <= 0 || l.lastStart.IsZero() {
		return nil
	}
	if err := sleepCtx(ctx, time.Until(l.lastStart.Add(l.minInterval))); err != nil {
		return ctxError(ctx, false)
	}
	return nil
}

// sleepCtx waits for d or until ctx ends (ctx.Err()).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *link) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// open dials (or opens the port) once, for Driver.Open. A failure is not
// an error: the link keeps trying on later requests.
func (l *link) open(ctx context.Context) {
	select {
	case l.bus.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-l.bus.sem }()
	if l.isClosed() {
		return
	}
	if l.busErr != nil {
		l.setState("connecting", l.busErr.Error())
		return
	}
	_, fresh, rerr := l.bus.connect(ctx, l.timeout, l.log)
	if rerr != nil {
		l.setState("connecting", rerr.reason)
		return
	}
	l.connected(fresh)
	l.setState("connected", "")
}

// connected notes a connection in use; one this link's request dialled
// after an earlier one is a reconnect. The caller holds bus.sem.
func (l *link) connected(fresh bool) {
	if !fresh {
		return
	}
	if l.dialled {
		l.stats.Reconnected()
	}
	l.dialled = true
}

// close marks the link closed (every later request fails with
// Bad_NotConnected) and releases the bus: the last user of a bus closes
// its connection or port, aborting a request in flight. It is safe to call
// twice.
func (l *link) close() error {
	l.mu.Lock()
	was := l.closed
	l.closed = true
	l.state, l.reason = "disconnected", "closed"
	l.mu.Unlock()
	if was {
		return nil
	}
	l.abortMu.Lock()
	if l.unwatch != nil {
		l.unwatch()
		l.unwatch, l.watched = nil, nil
	}
	l.abortMu.Unlock()
	return l.bus.release()
}

func (l *link) setState(state, reason string) {
	l.mu.Lock()
	if !l.closed {
		l.state, l.reason = state, reason
	}
	l.mu.Unlock()
}

func (l *link) getState() (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state, l.reason
}

// backoff is the wait after n consecutive failed dials: lo doubled n-1
// times, capped at hi, with "equal jitter" (half fixed, half random) so that
// gateways restarted together do not dial in lockstep.
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := hi
	if n < 31 {
		if x := lo << uint(n-1); x > 0 && x < hi {
			d = x
		}
	}
	half := d / 2
	return half + rand.N(half+1)
}

// errPeerClosed is wrapped by a failure where the device closed or reset the
// connection before answering.
var errPeerClosed = errors.New("connection closed by device")

// classify maps a failed request's error to quality (docs/project.md, Quality): a
// timeout is Bad_Timeout; a connection the device closed or reset is
// Bad_NotConnected; a bad frame and any other I/O error is
// Bad_CommunicationError.
func classify(ctx context.Context, err error, sent bool) *reqError {
	if ctx.Err() != nil {
		e := ctxError(ctx, sent)
		e.err = errors.Join(e.err, err)
		return e
	}
	r := &reqError{q: value.BadCommunicationError, reason: err.Error(), sent: sent, err: err}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		r.q, r.timeout, r.reason = value.BadTimeout, true, "timeout: no answer"
	case errors.Is(err, errBadFrame):
		r.reason = err.Error()
	case errors.Is(err, io.ErrUnexpectedEOF):
		r.reason = "short frame: connection closed mid-frame"
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrClosed):
		r.q, r.reason = value.BadNotConnected, errPeerClosed.Error()
		r.err = fmt.Errorf("%w: %w", errPeerClosed, err)
	}
	return r
}

// ctxError is the failure of a request cut short by ctx: Bad_Timeout for a
// deadline, Bad_CommunicationError for a cancellation.
func ctxError(ctx context.Context, sent bool) *reqError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &reqError{q: value.BadTimeout, reason: "timeout: deadline exceeded", sent: sent, err: ctx.Err()}
	}
	return &reqError{q: value.BadCommunicationError, reason: "canceled", sent: sent, err: ctx.Err()}
}

// exceptionError maps a Modbus exception response onto quality (Modbus
// Application Protocol V1.1b3 §7): 1, 2, 3 (the request does not fit the
// device) Bad_ConfigurationError; 4, 5, 6 and others Bad_DeviceFailure; 10,
// 11 (gateway path, target did not answer) Bad_CommunicationError, and 11
// counts towards the unit's breaker like a timeout. fc is masked: goburrow
// v0.1.0 reports the raw function byte with the 0x80 exception bit set
// (0x83 = "131"), which users cannot match with function 3 (docs/modbus.md, "Faults from the field"
// C07).
func exceptionError(fc, code byte) *reqError {
	fc &^= 0x80
	r := &reqError{q: value.BadDeviceFailure, exception: code,
		reason: fmt.Sprintf("%s (exception %d), function 0x%02X", exceptionName(code), code, fc)}
	r.err = errors.New(r.reason)
	switch code {
	case 1, 2, 3:
		r.q = value.BadConfigurationError
	case 10:
		r.q = value.BadCommunicationError
	case 11:
		r.q, r.timeout = value.BadCommunicationError, true
	}
	return r
}

func exceptionName(code byte) string {
	switch code {
	case 1:
		return "illegal function"
	case 2:
		return "illegal data address"
	case 3:
		return "illegal data value"
	case 4:
		return "server device failure"
	case 5:
		return "acknowledge"
	case 6:
		return "server device busy"
	case 8:
		return "memory parity error"
	case 10:
		return "gateway path unavailable"
	case 11:
		return "gateway target device failed to respond"
	}
	return "unknown exception"
}
