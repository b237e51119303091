package opcua

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// requestTimeout is gopcua's own per-request timeout, which it also sends as
// the TimeoutHint. Publish requests wait at the server for up to a
// keep-alive period, so it is long; every other call is bounded by a
// context with the device's timeout.
const requestTimeout = 10 * time.Minute

// session is one live OPC UA session on its own secure channel. When the
// channel fails, the session object (s) survives in the run loop so the
// next channel can re-activate it (docs/opcua.md, fault C11, C15).
type session struct {
	d           *Driver
	c           *opcua.Client
	s           *opcua.Session
	ns          []string
	thumb       string // server certificate thumbprint ("" with security None)
	reactivated bool
	revised     time.Duration // revised session timeout

	failOnce sync.Once
	failed   chan struct{}
	failErr  error

	types       sync.Map // node id text → typeInfo, for writes
	subsChanged chan struct{}
}

// fail marks the session broken; the run loop tears it down and reconnects.
func (s *session) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
	})
}

func (s *session) signalSubs() {
	select {
	case s.subsChanged <- struct{}{}:
	default:
	}
}

// run connects, serves the session until it fails, and reconnects, until
// ctx ends. Reconnecting first re-activates the old session on a new secure
// channel (its subscriptions survive on the server, and no CloseSession is
// sent: docs/opcua.md, fault C11); only when that fails is a new session made,
// with its subscriptions and monitored items rebuilt.
func (d *Driver) run(ctx context.Context) {
	defer close(d.done)
	var prev *opcua.Session // the session of the last channel, to re-activate
	var prevThumb string
	var lost time.Time
	fails := 0
	for ctx.Err() == nil {
		if prev != nil && time.Since(lost) > prev.RevisedTimeout() {
			prev = nil // expired on the server by now
		}
		sess, err := d.connect(ctx, prev, prevThumb)
		if err != nil {
			var ae *activateError
			if errors.As(err, &ae) {
				prev = nil // the server no longer has it
			}
			if ctx.Err() != nil {
				break
			}
			state, q, why, detail := classifyConnErr(err)
			d.setDown(state, q, why)
			d.setStateReason(state, detail)
			d.signalFirst()
			fails++
			wait := backoff(time.Duration(d.cfg.ReconnectMin), time.Duration(d.cfg.ReconnectMax), fails, err)
			d.log.Warn("opcua: connection failed; retrying", slog.String("state", state),
				slog.String("reason", detail), slog.Duration("retry_in", wait))
			var thumb string
			var ue *untrustedError
			if errors.As(err, &ue) {
				thumb = ue.thumb
			}
			d.sleep(ctx, wait, thumb != "")
			continue
		}
		d.convertChecked(sess)
		d.sessionUp(sess.reactivated)
		d.setUp(sess)
		d.signalFirst()
		d.log.Info("opcua: connected", slog.String("url", d.cfg.URL),
			slog.Bool("session_reactivated", sess.reactivated), slog.Duration("session_timeout", sess.revised))
		up := time.Now()
		d.serve(ctx, sess)
		if ctx.Err() != nil {
			d.shutdown(sess)
			break
		}
		why := "connection lost"
		if sess.failErr != nil {
			why = "connection lost: " + sess.failErr.Error()
		}
		d.log.Warn("opcua: session failed; reconnecting", slog.String("reason", why))
		prev, prevThumb, lost = sess.s, sess.thumb, time.Now()
		d.sessionDown()
		d.dropChannel(sess.c)
		d.setDown("connecting", value.BadNotConnected, why)
		// A connection that failed soon after it was made counts as a
		// failed attempt, so a server that drops every session is not
		// redialled in a tight loop; a stable one reconnects at once.
		if time.Since(up) < max(10*time.Duration(d.cfg.ReconnectMin), time.Second) {
			fails++
			d.sleep(ctx, backoff(time.Duration(d.cfg.ReconnectMin), time.Duration(d.cfg.ReconnectMax), fails, sess.failErr), false)
		} else {
			fails = 0
		}
	}
	d.signalFirst()
}

func (d *Driver) signalFirst() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.firstTry != nil {
		select {
		case <-d.firstTry:
		default:
			close(d.firstTry)
		}
	}
}

// sleep waits for wait, or until ctx ends. Waiting on an untrusted server,
// it also wakes when TrustCert or RejectCert changes a store, or when
// pki/trusted changes on disk (checked each second), so a certificate moved
// to trusted is used at once (docs/opcua.md, fault C19).
func (d *Driver) sleep(ctx context.Context, wait time.Duration, untrusted bool) {
	t := time.NewTimer(wait)
	defer t.Stop()
	var tick <-chan time.Time
	var fp string
	if untrusted {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		tick = tk.C
		fp = trustFingerprint(d.cfg.PKIDir)
	}
	changed := trustChanged()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-changed:
			if untrusted {
				return
			}
			changed = trustChanged()
		case <-tick:
			if trustFingerprint(d.cfg.PKIDir) != fp {
				return
			}
		}
	}
}

// backoff is the wait before attempt n+1 after n failures: capped
// exponential from lo to hi, with jitter in [w/2, w). A server answering
// BadTooManySessions gets at least 5 × lo (docs/opcua.md, fault C15).
func backoff(lo, hi time.Duration, n int, err error) time.Duration {
	if errors.Is(err, ua.StatusBadTooManySessions) {
		lo = 5 * lo
		if hi < lo {
			hi = lo
		}
	}
	w := lo
	for i := 1; i < n && w < hi; i++ {
		w *= 2
	}
	w = min(w, hi)
	return w/2 + time.Duration(rand.Int64N(int64(w/2)+1))
}

func (d *Driver) setUp(sess *session) {
	d.mu.Lock()
	d.sess = sess
	d.state, d.reason = "connected", ""
	d.downQ, d.downWhy = value.Good, ""
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// setDown records the outage and marks every monitored point with its
// quality (never "connected" with nothing flowing).
func (d *Driver) setDown(state string, q value.Quality, why string) {
	d.mu.Lock()
	d.sess = nil
	d.state, d.reason = state, why
	d.downQ, d.downWhy = q, why
	close(d.changed)
	d.changed = make(chan struct{})
	groups := d.groupList()
	d.mu.Unlock()
	for _, g := range groups {
		g.markDown(q, why)
	}
}

func (d *Driver) setStateReason(state, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess == nil {
		d.state, d.reason = state, reason
	}
}

// waitSession waits (up to the device timeout × 3, or ctx) for a live
// session other than old.
func (d *Driver) waitSession(ctx context.Context, old *session) *session {
	t := time.NewTimer(3 * time.Duration(d.cfg.Timeout))
	defer t.Stop()
	for {
		d.mu.Lock()
		s, ch := d.sess, d.changed
		d.mu.Unlock()
		if s != nil && s != old {
			return s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return nil
		case <-ch:
		}
	}
}

// serve runs the session's keep-alive, subscription maintainer and publish
// loop until the session fails or ctx ends.
func (d *Driver) serve(ctx context.Context, sess *session) {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sess.keepAlive(sctx) })
	wg.Go(func() { sess.maintain(sctx) })
	wg.Go(func() { sess.publishLoop(sctx) })
	wg.Go(func() { sess.poll(sctx) })
	select {
	case <-sess.failed:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
}

// shutdown closes sess for good: CloseSession with DeleteSubscriptions
// (gopcua's closeSession always sets it), then the channel.
func (d *Driver) shutdown(sess *session) {
	ctx, cancel := context.WithTimeout(context.Background(), min(time.Duration(d.cfg.Timeout), 2*time.Second))
	defer cancel()
	if err := sess.c.CloseSession(ctx); err != nil {
		d.log.Warn("opcua: CloseSession failed", slog.String("error", err.Error()))
	}
	if err := sess.c.Close(ctx); err != nil {
		d.log.Debug("opcua: closing the channel failed", slog.String("error", err.Error()))
	}
}

// dropChannel closes a client's secure channel and connection but keeps its
// session alive on the server, for re-activation: gopcua's Close would send
// CloseSession first (and delete the subscriptions), so the session is
// detached before.
func (d *Driver) dropChannel(c *opcua.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = c.DetachSession(ctx) // never fails in v0.8.0
	if err := c.Close(ctx); err != nil {
		d.log.Debug("opcua: closing the channel failed", slog.String("error", err.Error()))
	}
}

// guarded runs fn, one gopcua service call on a live session, with a
// context that ctx ending cannot cancel: gopcua v0.8.0 allocates the secure
// channel's next sequence number before it checks the context, so a request
// abandoned there (ctx already done, or ending at that moment) is never
// written, the next message skips a sequence number, and the server closes
// the channel (BadSequenceNumberInvalid) — one cancelled read would kill
// the connection of every tag. The call runs to its own end (bounded by
// timeout when > 0, and by the channel's life), while the caller stops
// waiting when ctx ends.
func guarded[T any](ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	base := context.WithoutCancel(ctx)
	gctx, cancel := context.WithCancel(base)
	if timeout > 0 {
		gctx, cancel = context.WithTimeout(base, timeout)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := fn(gctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// send sends one request over the session (guarded) and stores the
// response of type T.
func send[T ua.Response](ctx context.Context, s *session, timeout time.Duration, req ua.Request) (T, error) {
	return guarded(ctx, timeout, func(c context.Context) (T, error) {
		var res T
		err := s.c.Send(c, req, func(v ua.Response) error { return assign(v, &res) })
		return res, err
	})
}

// keepAlive reads Server.ServerStatus.CurrentTime (i=2258) every half
// revised session timeout, or every 3 publishing intervals (at least 1 s)
// when that is shorter, so that a session with nothing but polling never
// expires (docs/opcua.md, fault C16) and a dead server is noticed while idle. A
// keep-alive read that fails on the connection or times out fails the
// session.
func (s *session) keepAlive(ctx context.Context) {
	period := min(s.revised/2, max(3*time.Duration(s.d.cfg.PublishingInterval), time.Second))
	period = max(period, 50*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	req := &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{
		NodeID: ua.NewNumericNodeID(0, id.Server_ServerStatus_CurrentTime), AttributeID: ua.AttributeIDValue,
	}}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		_, err := guarded(ctx, time.Duration(s.d.cfg.Timeout), func(c context.Context) (*ua.ReadResponse, error) {
			return s.c.Read(c, req)
		})
		if ctx.Err() != nil {
			return
		}
		s.d.observe(start, err, false)
		if err != nil && (isConnErr(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ua.StatusBadTimeout)) {
			s.fail(fmt.Errorf("keep-alive read: %w", err))
			return
		}
	}
}

// classifyConnErr maps a failed connection attempt to the state, the
// quality and short reason tags get, and the state's detailed reason.
func classifyConnErr(err error) (state string, q value.Quality, why, detail string) {
	detail = err.Error()
	var qe *device.QualityError
	switch {
	case errors.Is(err, ErrCertUntrusted):
		return StateUntrusted, value.BadCertificateUntrusted, ErrCertUntrusted.Error(), detail
	case errors.As(err, &qe):
		st := StateRefused
		if qe.Quality == value.BadNotConnected {
			st = "connecting"
		}
		return st, qe.Quality, qe.Reason, detail
	}
	if code, ok := asStatus(err); ok {
		q := StatusQuality(uint32(code))
		switch q {
		case value.BadCertificateUntrusted, value.BadUserAccessDenied, value.BadConfigurationError:
			return StateRefused, q, statusReason(code), detail
		}
		return "connecting", value.BadNotConnected, "not connected: " + statusReason(code), detail
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "connecting", value.BadNotConnected, "not connected: timeout", detail
	}
	return "connecting", value.BadNotConnected, "not connected: " + detail, detail
}

// asStatus returns the OPC UA status code in err's chain.
func asStatus(err error) (ua.StatusCode, bool) {
	var code ua.StatusCode
	if errors.As(err, &code) {
		return code, true
	}
	return 0, false
}

// connStatus are the status codes that mean the channel or the session is
// gone (OPC UA Part 4 §7.34, Part 6 §7.1.5).
var connStatus = map[ua.StatusCode]bool{
	ua.StatusBadSessionIDInvalid:          true,
	ua.StatusBadSessionClosed:             true,
	ua.StatusBadSessionNotActivated:       true,
	ua.StatusBadSecureChannelIDInvalid:    true,
	ua.StatusBadSecureChannelClosed:       true,
	ua.StatusBadSecureChannelTokenUnknown: true,
	ua.StatusBadConnectionClosed:          true,
	ua.StatusBadServerNotConnected:        true,
	ua.StatusBadNotConnected:              true,
	ua.StatusBadCommunicationError:        true,
	ua.StatusBadServerHalted:              true,
	ua.StatusBadShutdown:                  true,
	ua.StatusBadTCPInternalError:          true,
	ua.StatusBadTCPSecureChannelUnknown:   true,
	ua.StatusBadTCPMessageTypeInvalid:     true,
	ua.StatusBadTCPNotEnoughResources:     true,
	ua.StatusBadTCPServerTooBusy:          true,
	ua.StatusBadDecodingError:             true,
	ua.StatusBadSecurityChecksFailed:      true,
	ua.StatusBadRequestTypeInvalid:        true,
	ua.StatusBadCertificateInvalid:        true,
	ua.StatusBadNonceInvalid:              true,
	ua.StatusBadSequenceNumberInvalid:     true,
	ua.StatusBadMaxConnectionsReached:     true,
	ua.StatusBadTCPEndpointURLInvalid:     true,
}

// isSessionErr reports whether err says the session is gone while the
// channel may live (BadSessionIdInvalid and kin).
func isSessionErr(err error) bool {
	code, ok := asStatus(err)
	if !ok {
		return false
	}
	switch code & codeMask {
	case ua.StatusBadSessionIDInvalid, ua.StatusBadSessionClosed, ua.StatusBadSessionNotActivated:
		return true
	}
	return false
}

// isConnErr reports whether err means the connection (channel or session)
// is unusable: a transport error, or one of connStatus. A timeout of one
// call and service faults about one request are not.
func isConnErr(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if code, ok := asStatus(err); ok {
		return connStatus[code&codeMask]
	}
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return true
	}
	// gopcua's own errors (errors.Errorf text) about a closed channel,
	// and anything else that is not a status: the transport.
	return true
}

// notSent reports whether a call failed before its request left: gopcua
// checks the channel before encoding.
func notSent(err error) bool {
	if errors.Is(err, ua.StatusBadServerNotConnected) {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "secure channel not open")
}

// connect makes one connection attempt: GetEndpoints, endpoint selection
// (exactly the configured policy and mode), the user-token rules, the trust
// check of the server certificate, the secure channel, and either the
// re-activation of prev (when the server certificate is the same) or a new
// session; then the namespace array.
//
// It works around these faults of gopcua v0.8.0, in our layer:
//   - The monitor goroutine started by Client.Connect re-activates a
//     restored session and then closes that same session (ActivateSession
//     closes the client's current session, which is the one re-activated),
//     and goes on to restore subscriptions with empty lists, so nothing
//     resumes (docs/opcua.md, fault C11; gopcua #854, #879). The driver never
//     calls Connect: it dials, creates and activates sessions itself, and
//     re-activates an old session on a fresh Client whose own session is
//     nil, so nothing is closed.
//   - CreateSession returns a nil session and a nil error when the
//     server's session signature does not verify (it only logs), and
//     Connect then dereferences it: the driver checks for nil.
//   - ActivateSession returns nil without sending anything when it cannot
//     make the client signature: the driver checks that the session was
//     really attached.
//   - The endpoint's ServerCertificate is used as one DER certificate,
//     and its SHA-1 as the receiver thumbprint, although servers send a
//     chain (docs/opcua.md, fault C19; gopcua #853): the driver splits the
//     chain, checks trust, and hands gopcua the leaf only. The
//     OpenSecureChannel response is still parsed by gopcua with the
//     single-certificate parser; a server that sends a chain there too
//     fails inside gopcua ("x509: trailing data"), which the driver
//     reports as the connection's reason.
//   - gopcua checks no trust list: checkServerCert runs before any
//     channel is opened with the certificate.
func (d *Driver) connect(ctx context.Context, prev *opcua.Session, prevThumb string) (_ *session, rerr error) {
	prevFailed := false
	defer func() {
		var ae *activateError
		if rerr != nil && prevFailed && !errors.As(rerr, &ae) {
			rerr = &activateError{rerr}
		}
	}()
	d.attempts.Add(1)
	timeout := time.Duration(d.cfg.Timeout)
	cctx, cancel := context.WithTimeout(ctx, 5*timeout)
	defer cancel()
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(cctx, timeout) }

	gctx, gcancel := context.WithTimeout(cctx, timeout)
	eps, err := opcua.GetEndpoints(gctx, d.cfg.URL, opcua.DialTimeout(timeout), opcua.RequestTimeout(timeout))
	gcancel()
	if err != nil {
		return nil, fmt.Errorf("get endpoints: %w", err)
	}
	ep, err := selectEndpoint(eps, policyURIs[d.cfg.policy()], modes[d.cfg.mode()])
	if err != nil {
		return nil, err
	}
	tokType := ua.UserTokenTypeAnonymous
	switch d.cfg.Auth.kind() {
	case "username":
		tokType = ua.UserTokenTypeUserName
	case "certificate":
		tokType = ua.UserTokenTypeCertificate
	}
	tok, tokPolicy, err := tokenPolicy(ep, tokType)
	if err != nil {
		return nil, err
	}
	needCert := ep.SecurityMode != ua.MessageSecurityModeNone ||
		(tokType != ua.UserTokenTypeAnonymous && tokPolicy != ua.SecurityPolicyURINone)
	epc := *ep
	thumb := ""
	chained := false
	if needCert {
		leaf, err := checkServerCert(d.cfg.PKIDir, ep.ServerCertificate, time.Now())
		if err != nil {
			return nil, err
		}
		epc = leafEndpoint(ep, leaf)
		thumb = Thumbprint(leaf.Raw)
		chained = len(leaf.Raw) < len(ep.ServerCertificate)
	}

	opts := []opcua.Option{
		opcua.AutoReconnect(false),
		opcua.DialTimeout(timeout),
		opcua.RequestTimeout(requestTimeout),
		opcua.Certificate(d.own.der),
		opcua.PrivateKey(d.own.key),
		opcua.SecurityFromEndpoint(&epc, tokType),
	}
	if d.userKey != nil {
		opts = append(opts, opcua.AuthPrivateKey(d.userKey))
	}
	c, err := opcua.NewClient(d.cfg.URL, opts...)
	if err != nil {
		return nil, device.Errorf(value.BadConfigurationError, "client config: %v", err)
	}
	if needCert {
		d.setStateReason("connecting", "server certificate trusted; connecting")
	}
	dctx, dcancel := step()
	err = c.Dial(dctx)
	dcancel()
	if err != nil {
		if chained {
			return nil, fmt.Errorf("open secure channel (%s, %s): %w (the server sends a certificate chain, which gopcua v0.8.0 cannot parse in the OpenSecureChannel response: x509: trailing data; docs/opcua.md, fault C19)",
				d.cfg.policy(), d.cfg.mode(), err)
		}
		return nil, fmt.Errorf("open secure channel (%s, %s): %w", d.cfg.policy(), d.cfg.mode(), err)
	}
	sess := &session{d: d, c: c, thumb: thumb, failed: make(chan struct{}), subsChanged: make(chan struct{}, 1)}
	if prev != nil && prevThumb == thumb {
		actx, acancel := step()
		err := activate(actx, c, prev)
		acancel()
		if err == nil {
			sess.s, sess.reactivated = prev, true
			sess.revised = prev.RevisedTimeout()
		} else {
			prevFailed = true
			d.log.Info("opcua: re-activating the old session failed; creating a new one", slog.String("error", err.Error()))
			if isConnErr(err) && !isSessionErr(err) {
				d.dropChannel(c)
				return nil, &activateError{err}
			}
		}
	}
	if sess.s == nil {
		sc := d.sessionConfig(&epc, tok, tokType, tokPolicy)
		sctx, scancel := step()
		s, err := c.CreateSession(sctx, sc)
		scancel()
		if err == nil && s == nil {
			err = errors.New("the server's session signature does not verify (gopcua v0.8.0 returns no session)")
		}
		if err != nil {
			d.dropChannel(c)
			return nil, fmt.Errorf("create session: %w", err)
		}
		actx, acancel := step()
		err = activate(actx, c, s)
		acancel()
		if err != nil {
			d.dropChannel(c)
			return nil, fmt.Errorf("activate session: %w", err)
		}
		sess.s, sess.revised = s, s.RevisedTimeout()
	}
	if sess.revised <= 0 {
		sess.revised = time.Duration(d.cfg.SessionTimeout)
	}
	nctx, ncancel := step()
	ns, err := c.NamespaceArray(nctx)
	ncancel()
	if err != nil {
		d.dropChannel(c)
		return nil, fmt.Errorf("read namespace array: %w", err)
	}
	sess.ns = ns
	return sess, nil
}

// leafEndpoint returns a copy of ep whose ServerCertificate is the leaf
// alone: gopcua takes the remote certificate and the receiver thumbprint
// (SHA-1 of the DER) from it, and both must be the leaf's (docs/opcua.md, "Faults from the field"
// C19).
func leafEndpoint(ep *ua.EndpointDescription, leaf *x509.Certificate) ua.EndpointDescription {
	c := *ep
	c.ServerCertificate = leaf.Raw
	return c
}

// activateError is a failed re-activation of the previous session: the run
// loop does not try that session again.
type activateError struct{ err error }

// Error says the re-activation failed and why.
func (e *activateError) Error() string { return "re-activate session: " + e.err.Error() }

// Unwrap returns the failure.
func (e *activateError) Unwrap() error { return e.err }

// activate activates s on c and checks that gopcua attached it.
func activate(ctx context.Context, c *opcua.Client, s *opcua.Session) error {
	if err := c.ActivateSession(ctx, s); err != nil {
		return err
	}
	if c.Session() != s {
		return errors.New("the session was not activated (gopcua could not sign it)")
	}
	return nil
}

// sessionConfig builds the CreateSession/ActivateSession parameters (OPC UA
// Part 4 §5.6.2, §5.6.3) for the chosen user token.
func (d *Driver) sessionConfig(ep *ua.EndpointDescription, tok *ua.UserTokenPolicy, tokType ua.UserTokenType, tokPolicy string) *uasc.SessionConfig {
	sc := &uasc.SessionConfig{
		ClientDescription: &ua.ApplicationDescription{
			ApplicationURI:  certURI(d.own.der),
			ProductURI:      "urn:qubiq:edge",
			ApplicationName: ua.NewLocalizedText("QUBIQ Edge"),
			ApplicationType: ua.ApplicationTypeClient,
		},
		SessionName:        "qubiq-edge/" + d.name,
		SessionTimeout:     time.Duration(d.cfg.SessionTimeout),
		LocaleIDs:          []string{"en-US"},
		UserTokenSignature: &ua.SignatureData{},
		AuthPolicyURI:      tokPolicy,
	}
	switch tokType {
	case ua.UserTokenTypeUserName:
		sc.UserIdentityToken = &ua.UserNameIdentityToken{PolicyID: tok.PolicyID, UserName: d.cfg.Auth.Username}
		sc.AuthPassword = d.password
	case ua.UserTokenTypeCertificate:
		sc.UserIdentityToken = &ua.X509IdentityToken{PolicyID: tok.PolicyID, CertificateData: d.userCert}
	default:
		sc.UserIdentityToken = &ua.AnonymousIdentityToken{PolicyID: tok.PolicyID}
	}
	return sc
}

// selectEndpoint returns the endpoint with exactly policy and mode (the
// highest SecurityLevel among several), never a weaker one; the error lists
// what the server offers.
func selectEndpoint(eps []*ua.EndpointDescription, policy string, mode ua.MessageSecurityMode) (*ua.EndpointDescription, error) {
	var best *ua.EndpointDescription
	var offers []string
	for _, ep := range eps {
		if ep == nil {
			continue
		}
		offers = append(offers, strings.TrimPrefix(ep.SecurityPolicyURI, ua.SecurityPolicyURIPrefix)+"/"+ep.SecurityMode.String())
		if ep.SecurityPolicyURI == policy && ep.SecurityMode == mode && (best == nil || ep.SecurityLevel > best.SecurityLevel) {
			best = ep
		}
	}
	if best == nil {
		return nil, device.Errorf(value.BadConfigurationError, "the server offers no endpoint with security %s/%s (it offers %s)",
			strings.TrimPrefix(policy, ua.SecurityPolicyURIPrefix), mode, strings.Join(offers, ", "))
	}
	return best, nil
}

// tokenRank orders the effective security policies of user tokens: the
// strongest first; None last.
var tokenRank = map[string]int{
	ua.SecurityPolicyURIAes256Sha256RsaPss:  5,
	ua.SecurityPolicyURIAes128Sha256RsaOaep: 4,
	ua.SecurityPolicyURIBasic256Sha256:      3,
	ua.SecurityPolicyURIBasic256:            2,
	ua.SecurityPolicyURIBasic128Rsa15:       1,
	ua.SecurityPolicyURINone:                0,
}

// tokenPolicy picks the endpoint's user token policy of type t with the
// strongest effective security policy (the token's own, else the
// channel's: OPC UA Part 4 §7.37) and returns it with that policy. A
// username whose password would travel in clear — effective policy None on
// a channel that does not encrypt — is refused with Bad_ConfigurationError
// (docs/architecture.md, Rules from the field).
func tokenPolicy(ep *ua.EndpointDescription, t ua.UserTokenType) (*ua.UserTokenPolicy, string, error) {
	var best *ua.UserTokenPolicy
	bestPol, bestRank := "", -1
	for _, tok := range ep.UserIdentityTokens {
		if tok == nil || tok.TokenType != t {
			continue
		}
		pol := tok.SecurityPolicyURI
		if pol == "" {
			pol = ep.SecurityPolicyURI
		}
		r, ok := tokenRank[pol]
		if !ok {
			continue // a policy gopcua does not implement
		}
		if t == ua.UserTokenTypeUserName && pol == ua.SecurityPolicyURINone && ep.SecurityMode == ua.MessageSecurityModeSignAndEncrypt {
			r = 6 // the channel encrypts: nothing to add
		}
		if r > bestRank {
			best, bestPol, bestRank = tok, pol, r
		}
	}
	names := map[ua.UserTokenType]string{
		ua.UserTokenTypeAnonymous: "anonymous", ua.UserTokenTypeUserName: "username", ua.UserTokenTypeCertificate: "X.509 certificate",
	}
	if best == nil {
		return nil, "", device.Errorf(value.BadConfigurationError, "the endpoint accepts no %s user token", names[t])
	}
	if t == ua.UserTokenTypeUserName && bestPol == ua.SecurityPolicyURINone && ep.SecurityMode != ua.MessageSecurityModeSignAndEncrypt {
		return nil, "", device.Errorf(value.BadConfigurationError,
			"refusing to send the password in clear: the endpoint %s/%s does not encrypt the UserName token (use security_mode SignAndEncrypt or a server whose UserName token policy encrypts it)",
			strings.TrimPrefix(ep.SecurityPolicyURI, ua.SecurityPolicyURIPrefix), ep.SecurityMode)
	}
	return best, bestPol, nil
}
