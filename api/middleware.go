package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// wrap is THE middleware: it enforces one route's row of the table, once,
// for every handler (one route table, enforced once). In order: the route's write
// deadline; credentials (401) and the route's scope or permission (403)
// unless the route is public; the dependency (501); the body limit (413);
// then the handler, whose error becomes a problem. A panic in a handler is
// answered 500 and logged.
func (s *Server) wrap(rt route) http.Handler {
	limit := rt.bodyLimit
	if limit == 0 {
		limit = s.cfg.BodyLimit
	}
	target := rt.pattern()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panicked", slog.String("route", target), slog.Any("panic", v))
				if sw.status == 0 {
					s.writeError(sw, r, target, fmt.Errorf("panic: %v", v))
				}
			}
			took := time.Since(start)
			s.log.DebugContext(r.Context(), "request", slog.String("route", target), slog.Int("status", sw.status),
				slog.Duration("took", took))
			s.observe(rt, target, sw.status, took)
		}()
		if rt.stream {
			rc := http.NewResponseController(w)
			if err := errors.Join(rc.SetWriteDeadline(time.Time{}), rc.SetReadDeadline(time.Time{})); err != nil {
				s.log.WarnContext(r.Context(), "cannot lift deadlines", slog.String("route", target), slog.Any("error", err))
			}
		}
		if rt.longWrite {
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.LongWriteTimeout)); err != nil {
				s.log.WarnContext(r.Context(), "cannot extend write deadline", slog.String("route", target), slog.Any("error", err))
			}
		}
		r, g, err := s.authorize(r, rt, target)
		if err != nil {
			s.writeError(sw, r, target, err)
			return
		}
		if !s.deps.has(rt.dep) {
			s.writeError(sw, r, target, errorf(http.StatusNotImplemented, KindNotImplemented,
				"%s is not available in this daemon (%s)", target, rt.dep))
			return
		}
		if r.ContentLength > limit {
			s.writeError(sw, r, target, &http.MaxBytesError{Limit: limit})
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, limit)
		if err := rt.handle(s, sw, r, g); err != nil {
			s.writeError(sw, r, target, err)
		}
	})
}

// authorize returns the caller's grant for rt: the zero Grant on a public
// route; else the grant of the bearer token, which must be current and hold
// the route's scope or permission; else, without an Authorization header,
// the grant of the browser session named by the session cookie
// (authorizeSession: CSRF checked, grant derived on the server). The
// request returned carries the session in its context. Refusals are logged
// (denials are loud and typed).
func (s *Server) authorize(r *http.Request, rt route, target string) (*http.Request, auth.Grant, error) {
	if rt.need.isPublic() {
		return r, auth.Grant{}, nil
	}
	if r.Header.Get("Authorization") == "" {
		if tok, ok := s.sessionToken(r); ok {
			return s.authorizeSession(r, rt, target, tok)
		}
	}
	if rt.need.session && !s.deps.has(rt.dep) {
		return r, auth.Grant{}, errorf(http.StatusNotImplemented, KindNotImplemented,
			"%s is not available in this daemon (%s)", target, rt.dep)
	}
	if rt.need.session {
		return r, auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated,
			"%s needs a LiveView session: log in with POST %s/auth/login", target, prefix)
	}
	if s.deps.Auth == nil {
		return r, auth.Grant{}, errorf(http.StatusNotImplemented, KindNotImplemented,
			"authentication is not available in this daemon, so %s cannot be served", target)
	}
	token, ok := bearer(r)
	if !ok {
		s.refusedCredential(r, target, gateway.CredentialMissing)
		if r.Header.Get("Authorization") != "" {
			return r, auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated,
				"the Authorization header is not of the form \"Bearer <token>\" (RFC 6750 §2.1): send Authorization: Bearer <token>")
		}
		return r, auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated,
			"missing credentials: send Authorization: Bearer <token>")
	}
	g, err := s.deps.Auth.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		reason := gateway.CredentialReason(err)
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("reason", reason))
		s.refusedCredential(r, target, reason)
		return r, auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated, "invalid, revoked or expired credentials")
	case err != nil:
		s.log.WarnContext(r.Context(), "credential check failed", slog.String("route", target), slog.Any("error", err))
		return r, auth.Grant{}, &httpError{status: http.StatusServiceUnavailable, kind: KindUnavailable,
			detail: "credentials could not be checked; retry", retryAfter: true}
	}
	if g.Expired(s.cfg.Now()) {
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", g.Principal),
			slog.String("reason", "expired"))
		s.refusedCredential(r, target, gateway.CredentialExpired)
		return r, auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated,
			"credentials expired at %s", g.Expires.UTC().Format(time.RFC3339))
	}
	if err := s.requireNeed(r, rt, target, g); err != nil {
		return r, auth.Grant{}, err
	}
	return r, g, nil
}

// refusedCredential audits a request refused for its bearer token
// (aggregated per client address and reason by the service).
func (s *Server) refusedCredential(r *http.Request, target, reason string) {
	if s.deps.CredentialRefusals != nil {
		s.deps.CredentialRefusals.AuditCredentialRefusal(r.Context(), clientAddr(r), target, reason)
	}
}

// requireNeed checks g against the route's scope or permission and logs a
// refusal.
func (s *Server) requireNeed(r *http.Request, rt route, target string, g auth.Grant) error {
	var err error
	switch {
	case rt.need.session:
		return nil
	case rt.need.scope != "":
		err = g.RequireScope(rt.need.scope, target)
	default:
		err = g.RequirePermission(rt.need.perm, target)
	}
	if err != nil {
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", g.Principal),
			slog.String("realm", string(g.Realm)), slog.String("origin", g.Origin), slog.String("need", rt.need.String()))
		if s.deps.Refusals != nil {
			s.deps.Refusals.AuditRefusal(r.Context(), g, target, err)
		}
	}
	return err
}

// bearer returns the token of an "Authorization: Bearer <token>" header
// (the scheme is case-insensitive, RFC 6750 §2.1).
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// statusWriter records the status a handler wrote, for the log and so a
// panic after the header went out is not answered twice.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
