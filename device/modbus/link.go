package modbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/goburrow/modbus"

	"qubiq.dev/edge/value"
)

// Reconnect backoff (DESIGN.md, device.Driver: capped exponential backoff
// with jitter).
const (
	backoffStart = 100 * time.Millisecond
	backoffCap   = 30 * time.Second
)

// link is the one Modbus TCP connection of a Driver, with one request in
// flight at a time.
//
// It uses goburrow/modbus v0.1.0 for PDU encoding and response parsing (its
// Client over the TCPClientHandler's packager) but not for the socket:
// goburrow's TCP transport keeps the connection open after a read timeout
// and after a transaction-id mismatch, so a response that arrives after the
// timeout stays in the socket and every later request reads the answer to
// the one before ("response transaction id 'N' does not match request
// 'N+1'", forever; goburrow/modbus#64, cases/modbus.md C08), and its
// idle-close timer never fires while polls keep coming. link instead:
//
//   - closes the connection after any error but a Modbus exception (a
//     timeout, a frame that fails checkResponse, a short frame, EOF) and
//     dials again on the next request, so a late answer can never be read
//     as the answer to a later request;
//   - bounds each request by the configured timeout and by ctx (a cancelled
//     ctx aborts the socket I/O at once);
//   - dials with capped exponential backoff and jitter; while it backs off,
//     requests fail at once with Bad_NotConnected instead of waiting;
//   - keeps min_interval between the starts of two requests.
type link struct {
	addr        string
	timeout     time.Duration
	minInterval time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	log         *slog.Logger

	sem chan struct{} // one request in flight; the holder owns the fields below

	pk        *modbus.TCPClientHandler // used as packager only: MBAP header, transaction ids
	client    modbus.Client
	tr        transport
	lastStart time.Time
	failures  int       // consecutive failed dials
	retryAt   time.Time // no dial before this
	dialErr   error     // the last failed dial

	mu     sync.Mutex // guards nc, closed, state, reason
	nc     net.Conn
	closed bool
	state  string
	reason string
}

func newLink(addr string, c Config, log *slog.Logger) *link {
	l := &link{
		addr:        addr,
		timeout:     time.Duration(c.Timeout),
		minInterval: time.Duration(c.MinInterval),
		backoffMin:  backoffStart,
		backoffMax:  backoffCap,
		log:         log,
		sem:         make(chan struct{}, 1),
		pk:          modbus.NewTCPClientHandler(addr),
		state:       "connecting",
	}
	l.client = modbus.NewClient2(l.pk, &l.tr)
	return l
}

// transport is the modbus.Transporter that link gives goburrow's client: one
// request, one response, on the connection link chose, under the deadline
// link set. sent reports whether any byte of the request went out (a write
// that failed after that may have been applied).
type transport struct {
	conn net.Conn
	sent bool
}

// Send writes adu and reads one response frame, verified by checkResponse.
func (t *transport) Send(adu []byte) ([]byte, error) {
	t.sent = false
	n, err := t.conn.Write(adu)
	if n > 0 {
		t.sent = true
	}
	if err != nil {
		return nil, err
	}
	resp, err := readFrame(t.conn)
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
// first when needed. A read (idempotent) that fails because the device had
// closed a connection opened earlier (devices close idle connections) is
// tried once more on a new connection; a write is never retried (DESIGN.md,
// Hard-won rules).
func (l *link) do(ctx context.Context, unit byte, idempotent bool, fn func(modbus.Client) ([]byte, error)) ([]byte, *reqError) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxError(ctx, false)
	}
	defer func() { <-l.sem }()
	for attempt := 0; ; attempt++ {
		l.mu.Lock()
		reused := l.nc != nil
		l.mu.Unlock()
		res, rerr := l.once(ctx, unit, fn)
		if rerr == nil || !idempotent || attempt > 0 || !reused || !errors.Is(rerr, errPeerClosed) {
			return res, rerr
		}
		l.log.Debug("modbus: connection closed by device; retrying read on a new connection", slog.String("reason", rerr.reason))
	}
}

// once runs one request. The caller holds sem.
func (l *link) once(ctx context.Context, unit byte, fn func(modbus.Client) ([]byte, error)) ([]byte, *reqError) {
	if err := l.waitInterval(ctx); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, false) // nothing sent
	}
	nc, rerr := l.connect(ctx)
	if rerr != nil {
		return nil, rerr
	}
	dl := time.Now().Add(l.timeout)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	if err := nc.SetDeadline(dl); err != nil {
		l.drop(nc, err)
		return nil, classify(ctx, err, false)
	}
	stop := context.AfterFunc(ctx, func() {
		_ = nc.SetDeadline(time.Unix(1, 0)) // abort the I/O; the request fails and nc is dropped
	})
	l.pk.SlaveId = unit
	l.tr = transport{conn: nc}
	l.lastStart = time.Now()
	res, err := fn(l.client)
	stop()
	sent := l.tr.sent
	l.tr = transport{}
	if err == nil {
		l.setState("connected", "")
		return res, nil
	}
	var me *modbus.ModbusError
	if errors.As(err, &me) {
		return nil, exceptionError(me.FunctionCode, me.ExceptionCode)
	}
	l.drop(nc, err)
	return nil, classify(ctx, err, sent)
}

// waitInterval sleeps until min_interval has passed since the last request
// started.
func (l *link) waitInterval(ctx context.Context) *reqError {
	if l.minInterval <= 0 || l.lastStart.IsZero() {
		return nil
	}
	wait := time.Until(l.lastStart.Add(l.minInterval))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxError(ctx, false)
	}
}

// connect returns the open connection or dials one. While a failed dial's
// backoff runs it fails at once with Bad_NotConnected.
func (l *link) connect(ctx context.Context) (net.Conn, *reqError) {
	l.mu.Lock()
	nc, closed := l.nc, l.closed
	l.mu.Unlock()
	if closed {
		return nil, &reqError{q: value.BadNotConnected, reason: "driver closed", err: errClosed}
	}
	if nc != nil {
		return nc, nil
	}
	if now := time.Now(); now.Before(l.retryAt) {
		return nil, &reqError{q: value.BadNotConnected, err: l.dialErr,
			reason: fmt.Sprintf("not connected: %v (next attempt in %s)", l.dialErr, l.retryAt.Sub(now).Round(time.Millisecond))}
	}
	d := net.Dialer{Timeout: l.timeout}
	c, err := d.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx, false)
		}
		l.failures++
		l.dialErr = err
		l.retryAt = time.Now().Add(backoff(l.failures, l.backoffMin, l.backoffMax))
		if l.failures == 1 {
			l.log.Warn("modbus: connect failed; retrying with backoff", slog.String("addr", l.addr), slog.Any("err", err))
		}
		l.setState("connecting", err.Error())
		return nil, &reqError{q: value.BadNotConnected, reason: "not connected: " + err.Error(), err: err}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = c.Close() // raced with Close: nothing was sent on c
		return nil, &reqError{q: value.BadNotConnected, reason: "driver closed", err: errClosed}
	}
	l.nc = c
	l.mu.Unlock()
	if l.failures > 0 {
		l.log.Info("modbus: connected", slog.String("addr", l.addr), slog.Int("failed_attempts", l.failures))
	}
	l.failures = 0
	l.setState("connected", "")
	return c, nil
}

// drop closes nc after a failed request so that nothing left in its socket
// (a late answer) is read as the answer to a later request.
func (l *link) drop(nc net.Conn, cause error) {
	l.mu.Lock()
	if l.nc == nc {
		l.nc = nil
	}
	l.mu.Unlock()
	if err := nc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		l.log.Debug("modbus: close after failed request", slog.Any("err", err))
	}
	l.log.Debug("modbus: connection dropped after failed request", slog.Any("cause", cause))
}

// open dials once, for Driver.Open. A failure is not an error: the link
// keeps trying on later requests.
func (l *link) open(ctx context.Context) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-l.sem }()
	_, _ = l.connect(ctx) // the outcome shows in State and in the next Read's quality
}

// close closes the connection (aborting a request in flight) and makes every
// later request fail with Bad_NotConnected. It is safe to call twice.
func (l *link) close() error {
	l.mu.Lock()
	nc := l.nc
	l.nc, l.closed = nil, true
	l.state, l.reason = "disconnected", "closed"
	l.mu.Unlock()
	if nc != nil {
		if err := nc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	return nil
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

// classify maps a failed request's error to quality (DESIGN.md, Quality): a
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
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, net.ErrClosed):
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
// (0x83 = "131"), which users cannot match with function 3 (cases/modbus.md
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
