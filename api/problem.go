package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Problem kinds the server itself produces (the "kind" of a problem body).
const (
	KindUnauthenticated  = "unauthenticated"
	KindPermissionDenied = "permission_denied"
	KindInvalid          = "invalid"
	KindNotFound         = "not_found"
	KindMethodNotAllowed = "method_not_allowed"
	KindTooLarge         = "too_large"
	KindUnavailable      = "unavailable"
	KindNotImplemented   = "not_implemented"
	KindInternal         = "internal"
	KindTimeout          = "timeout"
	KindBusy             = "busy"
)

// problemTypeBase prefixes the kind to make a problem's "type" URI.
const problemTypeBase = "urn:qubiq:problem:"

// httpError is an error the server itself raises with a chosen status, kind
// and detail (a refused request body, a missing scope).
type httpError struct {
	status     int
	kind       string
	detail     string
	retryAfter bool
}

// Error returns the detail.
func (e *httpError) Error() string { return e.detail }

func errorf(status int, kind, format string, args ...any) *httpError {
	return &httpError{status: status, kind: kind, detail: fmt.Sprintf(format, args...)}
}

// scriptStatus maps a *gateway.ScriptError kind to its status (README:
// REST, POST /scripts/{module}/{entry}/run).
var scriptStatus = map[string]int{
	"timeout":               http.StatusGatewayTimeout,
	"permission_denied":     http.StatusForbidden,
	"runtime_missing":       http.StatusServiceUnavailable,
	"busy":                  http.StatusServiceUnavailable,
	"memory_limit_exceeded": http.StatusInternalServerError,
	"killed":                http.StatusInternalServerError,
	"script_error":          http.StatusUnprocessableEntity,
	"invalid":               http.StatusBadRequest,
	"not_found":             http.StatusNotFound,
}

// classify maps err to the problem to send (see the package doc), whether
// to send Retry-After, and whether the error is internal (logged, its text
// not sent).
func classify(err error) (p apitypes.Problem, retryAfter, internal bool) {
	var (
		he  *httpError
		de  *auth.DeniedError
		se  *gateway.ScriptError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &he):
		return newProblem(he.status, he.kind, he.detail), he.retryAfter, false
	case errors.As(err, &mbe):
		return newProblem(http.StatusRequestEntityTooLarge, KindTooLarge,
			fmt.Sprintf("request body exceeds the route's limit of %d bytes", mbe.Limit)), false, false
	case errors.As(err, &se):
		st, ok := scriptStatus[se.Kind]
		if !ok {
			st = http.StatusInternalServerError
		}
		return newProblem(st, se.Kind, se.Detail), se.Kind == KindBusy, false
	case errors.Is(err, ErrUnauthenticated):
		return newProblem(http.StatusUnauthorized, KindUnauthenticated, gateway.Message(err)), false, false
	case errors.As(err, &de):
		return newProblem(http.StatusForbidden, KindPermissionDenied, de.Error()), false, false
	case errors.Is(err, ErrInvalid):
		return newProblem(http.StatusBadRequest, KindInvalid, gateway.Message(err)), false, false
	case errors.Is(err, ErrNotFound):
		return newProblem(http.StatusNotFound, KindNotFound, gateway.Message(err)), false, false
	case errors.Is(err, ErrConflict):
		return newProblem(http.StatusConflict, KindConflict, gateway.Message(err)), false, false
	case errors.Is(err, ErrInstallFailed):
		return newProblem(http.StatusBadGateway, KindInstallFailed, gateway.Message(err)), false, false
	case errors.Is(err, ErrUnavailable):
		return newProblem(http.StatusServiceUnavailable, KindUnavailable, gateway.Message(err)+"; retry"), true, false
	case errors.Is(err, context.Canceled):
		// The caller went away (or the daemon is stopping): not a fault
		// of ours worth an error log, and nobody may read the answer.
		return newProblem(http.StatusServiceUnavailable, KindUnavailable, "the request was canceled"), false, false
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(http.StatusGatewayTimeout, KindTimeout, "the request timed out"), false, false
	}
	return newProblem(http.StatusInternalServerError, KindInternal,
		"internal error; the daemon log has the cause"), false, true
}

func newProblem(status int, kind, detail string) apitypes.Problem {
	return apitypes.Problem{Type: problemTypeBase + kind, Title: http.StatusText(status),
		Status: status, Detail: detail, Kind: kind}
}

// writeError answers err as application/problem+json. Internal errors are
// logged with the route; the client sees a generic detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, route string, err error) {
	p, retry, internal := classify(err)
	if internal {
		s.log.ErrorContext(r.Context(), "request failed", slog.String("route", route), slog.Any("error", err))
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qubiq"`)
	}
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p apitypes.Problem) {
	b, err := json.Marshal(p)
	if err != nil { // a Problem of strings and an int always encodes
		b = []byte(`{"status":500,"kind":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", apitypes.ProblemContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	if _, err := w.Write(append(b, '\n')); err != nil {
		return // the client went away; nothing left to tell it
	}
}

// writeJSON answers v as application/json with status.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	// No HTML escaping: values and script results go out as sent ("<" stays
	// "<"); the Content-Type and nosniff keep browsers from reading it as HTML.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.writeError(w, r, r.Pattern, fmt.Errorf("encode answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if _, err := w.Write(buf.Bytes()); err != nil {
		s.log.DebugContext(r.Context(), "answer not delivered", slog.String("route", r.Pattern), slog.Any("error", err))
	}
}
