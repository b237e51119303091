package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/api/liveview"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Browser session names (issue 7).
const (
	// SessionCookie holds the session token on plain HTTP. With TLS the
	// cookie is SecureSessionCookie: the __Host- prefix makes the browser
	// refuse it unless Secure, Path=/ and host-only.
	SessionCookie       = "qubiq_session"
	SecureSessionCookie = "__Host-qubiq_session"
	// CSRFHeader carries the session's CSRF token on every state-changing
	// request of a browser session (a cross-site form cannot set it).
	CSRFHeader = "X-CSRF-Token"
	// PanelHeader names the view a request comes from; the server checks
	// that the session may open it, and records it as the origin
	// ("liveview:<panel>").
	PanelHeader = "X-Qubiq-Panel"
	// BackgroundHeader marks a request the panel makes on its own (event
	// polling, reconnecting): it does not restart the idle timeout, so an
	// unattended panel still logs out. A client can only shorten its
	// session with it, never extend it.
	BackgroundHeader = "X-Qubiq-Background"
)

// Problem kinds of browser sessions.
const (
	KindCSRF        = "csrf"
	KindRateLimited = "rate_limited"
	KindConflict    = "conflict"
)

// callerSession is the browser session a request was authorised by.
type callerSession struct {
	token string
	info  auth.SessionInfo
	panel string // a view the session may open, or ""
	// console: the request comes from the engineer's console
	// (ConsoleHeader, a platform-realm session; console.go).
	console bool
}

type sessionKey struct{}

// sessionOf returns the browser session that authorised r, if any.
func sessionOf(r *http.Request) (*callerSession, bool) {
	cs, ok := r.Context().Value(sessionKey{}).(*callerSession)
	return cs, ok
}

func (s *Server) cookieName() string {
	if s.cfg.TLS != nil {
		return SecureSessionCookie
	}
	return SessionCookie
}

// sessionToken returns the session cookie's value, when the server has
// sessions and the request carries one.
func (s *Server) sessionToken(r *http.Request) (string, bool) {
	if s.deps.Sessions == nil {
		return "", false
	}
	c, err := r.Cookie(s.cookieName())
	if err != nil || c.Value == "" {
		return "", false
	}
	return c.Value, true
}

// unsafeMethod reports whether m changes state (RFC 9110 §9.2.1).
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// authorizeSession authorises r by the browser session of token: the
// session must be live; a state-changing request must pass the CSRF checks;
// a PanelHeader must name a view the session may open. The grant is
// auth.LiveViewSessionGrant of the session as stored, never anything the request
// carries (realm, level or scope values in headers or bodies change
// nothing).
func (s *Server) authorizeSession(r *http.Request, rt route, target, token string) (*http.Request, auth.Grant, error) {
	info, err := s.deps.Sessions.Session(r.Context(), token, r.Header.Get(BackgroundHeader) == "")
	switch {
	case errors.Is(err, ErrUnauthenticated):
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("reason", "session ended"))
		s.refusedCredential(r, target, gateway.CredentialSession)
		return r, auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated, "the session ended or is unknown: log in again")
	case err != nil:
		s.log.WarnContext(r.Context(), "session check failed", slog.String("route", target), slog.Any("error", err))
		return r, auth.Grant{}, &httpError{status: http.StatusServiceUnavailable, kind: KindUnavailable,
			detail: "the session could not be checked; retry", retryAfter: true}
	}
	if unsafeMethod(r.Method) {
		if err := checkCSRF(r, info.CSRF); err != nil {
			s.log.WarnContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", info.User),
				slog.String("reason", "csrf"), slog.String("origin_header", r.Header.Get("Origin")))
			return r, auth.Grant{}, err
		}
	}
	panel, err := s.sessionPanel(r, info)
	if err != nil {
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", info.User),
			slog.String("reason", "panel"))
		return r, auth.Grant{}, err
	}
	fromConsole, err := consoleSession(r, rt, info, panel)
	if err != nil {
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", info.User),
			slog.String("reason", "console"))
		return r, auth.Grant{}, err
	}
	g := auth.LiveViewSessionGrant(info.Session(panel))
	g.Expires = info.Expires
	if fromConsole {
		g.Origin = ConsoleOrigin
	}
	if !rt.liveview {
		if err := s.requireNeed(r, rt, target, g); err != nil {
			return r, auth.Grant{}, err
		}
	}
	cs := &callerSession{token: token, info: info, panel: panel, console: fromConsole}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, cs)), g, nil
}

// ownOrigin is the origin of the server as the request reached it.
func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// checkOrigin refuses a request whose Origin header names another origin,
// or whose Sec-Fetch-Site says it came from another site (OWASP CSRF
// Prevention Cheat Sheet, "Verifying origin with standard headers" and
// "Fetch Metadata").
func checkOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && o != ownOrigin(r) {
		return errorf(http.StatusForbidden, KindCSRF, "cross-origin request refused: Origin %q is not %q", o, ownOrigin(r))
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return errorf(http.StatusForbidden, KindCSRF, "cross-site request refused (Sec-Fetch-Site: %s)", site)
	}
	return nil
}

// checkCSRF is the CSRF defence of a state-changing request of a browser
// session: the origin checks, then the session's token in CSRFHeader
// (synchroniser token pattern; a cross-site form cannot set a header).
func checkCSRF(r *http.Request, want string) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errorf(http.StatusForbidden, KindCSRF,
			"missing or wrong %s header: a browser session's state-changing request must send its session's CSRF token", CSRFHeader)
	}
	return nil
}

// sessionPanel returns the view named by PanelHeader after checking that
// it exists and the session may open it ("" without the header).
func (s *Server) sessionPanel(r *http.Request, info auth.SessionInfo) (string, error) {
	name := r.Header.Get(PanelHeader)
	if name == "" {
		return "", nil
	}
	if s.deps.LiveView == nil {
		return "", errorf(http.StatusNotFound, KindNotFound, "no LiveView panel %q: this daemon has no views", name)
	}
	v, ok := s.findView(r.Context(), name)
	if !ok {
		return "", errorf(http.StatusNotFound, KindNotFound, "no LiveView panel %q in the project", name)
	}
	if !liveview.MayOpen(v, info.Realm, info.Level) {
		return "", &auth.DeniedError{Kind: "level", Need: v.MinLevel, Target: "LiveView panel " + name}
	}
	return name, nil
}

func (s *Server) findView(ctx context.Context, name string) (apitypes.View, bool) {
	i := slices.IndexFunc(s.deps.LiveView.Views(ctx), func(v apitypes.View) bool { return v.Name == name })
	if i < 0 {
		return apitypes.View{}, false
	}
	return s.deps.LiveView.Views(ctx)[i], true
}

// clientAddr is the IP the request came from (the rate limiter's key).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *Server) sessionCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: s.cookieName(), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.cfg.TLS != nil, SameSite: http.SameSiteStrictMode}
}

func (s *Server) sessionAnswer(info auth.SessionInfo) apitypes.SessionInfo {
	out := apitypes.SessionInfo{User: info.User, Realm: string(info.Realm), CSRFToken: info.CSRF,
		Expires: info.Expires.UTC(), IdleTimeoutS: int64(s.idleTimeout() / time.Second), Permissions: []string{}}
	if info.Realm == auth.RealmOperator {
		out.Level = info.Level.String()
	}
	for _, p := range info.Permissions {
		out.Permissions = append(out.Permissions, string(p))
	}
	if s.deps.LiveView != nil {
		out.EscapeHatch = s.deps.LiveView.EscapeHatch()
	}
	return out
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	var req apitypes.LoginRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.User == "" || req.Password == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "user" or "password"`)
	}
	token, info, err := s.deps.Sessions.Login(r.Context(), req.User, req.Password, clientAddr(r))
	var rl *auth.RateLimitedError
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(rl.Seconds())) // the text says the same

		return errorf(http.StatusTooManyRequests, KindRateLimited, "%s", rl.Error())
	case errors.Is(err, ErrUnauthenticated):
		return errorf(http.StatusUnauthorized, KindUnauthenticated, "wrong user name or password")
	case err != nil:
		return err
	}
	http.SetCookie(w, s.sessionCookie(token, int(time.Until(info.Expires)/time.Second)))
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, s.sessionAnswer(info))
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	cs, ok := sessionOf(r)
	if !ok {
		return fmt.Errorf("logout without a session in the context")
	}
	if err := s.deps.Sessions.Logout(r.Context(), cs.token); err != nil {
		return err
	}
	http.SetCookie(w, s.sessionCookie("", -1))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) sessionInfo(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	cs, ok := sessionOf(r)
	if !ok {
		return fmt.Errorf("session info without a session in the context")
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, s.sessionAnswer(cs.info))
	return nil
}
