package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
)

// wrap is THE middleware: it enforces one route's row of the table, once,
// for every handler (STYLE.md rule 12). In order: the route's write
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
			s.log.DebugContext(r.Context(), "request", slog.String("route", target), slog.Int("status", sw.status),
				slog.Duration("took", time.Since(start)))
		}()
		if rt.longWrite {
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.LongWriteTimeout)); err != nil {
				s.log.WarnContext(r.Context(), "cannot extend write deadline", slog.String("route", target), slog.Any("error", err))
			}
		}
		g, err := s.authorize(r, rt, target)
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
// the route's scope or permission. Refusals are logged (DESIGN.md: denials
// are loud).
func (s *Server) authorize(r *http.Request, rt route, target string) (auth.Grant, error) {
	if rt.need.isPublic() {
		return auth.Grant{}, nil
	}
	if s.deps.Auth == nil {
		return auth.Grant{}, errorf(http.StatusNotImplemented, KindNotImplemented,
			"authentication is not available in this daemon, so %s cannot be served", target)
	}
	token, ok := bearer(r)
	if !ok {
		return auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated,
			"missing credentials: send Authorization: Bearer <token>")
	}
	g, err := s.deps.Auth.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("reason", "unauthenticated"))
		return auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated, "invalid, revoked or expired credentials")
	case err != nil:
		s.log.WarnContext(r.Context(), "credential check failed", slog.String("route", target), slog.Any("error", err))
		return auth.Grant{}, &httpError{status: http.StatusServiceUnavailable, kind: KindUnavailable,
			detail: "credentials could not be checked; retry", retryAfter: true}
	}
	if !g.Expires.IsZero() && !s.cfg.Now().Before(g.Expires) {
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", g.Principal),
			slog.String("reason", "expired"))
		return auth.Grant{}, errorf(http.StatusUnauthorized, KindUnauthenticated,
			"credentials expired at %s", g.Expires.UTC().Format(time.RFC3339))
	}
	if rt.need.scope != "" {
		err = g.RequireScope(rt.need.scope, target)
	} else {
		err = g.RequirePermission(rt.need.perm, target)
	}
	if err != nil {
		s.log.InfoContext(r.Context(), "request refused", slog.String("route", target), slog.String("principal", g.Principal),
			slog.String("realm", string(g.Realm)), slog.String("need", rt.need.String()))
		return auth.Grant{}, err
	}
	return g, nil
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
