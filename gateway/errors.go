package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"qubiq.dev/edge/auth"
)

// Sentinel errors of the operations. An operation wraps one (with %w and
// its subject, so the text names what is wrong) to say what kind of
// failure it is; Kind names it for a front door's wire ("invalid",
// "not_found", ...). Refusals are *auth.DeniedError (kind
// "permission_denied"), failures of a script run *ScriptError (its own
// kind), refused project imports *ProjectError, unacknowledged package
// installs *WideningError.
var (
	// ErrUnauthenticated: a credential (bearer token, session token, user
	// name and password) is unknown, revoked, malformed or expired. REST
	// answers 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrInvalid: the request's content is not acceptable (an unknown
	// scope, a bad module name, a value of the wrong type); the text names
	// the bad value. REST answers 400.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: the request names something that does not exist (an
	// API key id, a var, a file, a message handler, a device). REST 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request conflicts with the current state: a user
	// name in use, a script push whose version is not above the module's
	// latest, a rollback with no earlier version, another package
	// operation running, a package that is a dependency of another, an
	// install from an index that is not configured. REST 409.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the appliance cannot answer now and the caller
	// should retry; nothing was changed (a failed write-level lookup, a
	// full audit queue, a device that is connecting). REST 503 with
	// Retry-After.
	ErrUnavailable = errors.New("temporarily unavailable")
	// ErrInstallFailed: pip failed (the index is unreachable, a wheel is
	// missing, a package does not fit the runtime); nothing changed.
	// REST 502.
	ErrInstallFailed = errors.New("install failed")
)

// Script failure kinds: ScriptError.Kind, and the kinds of a run that did
// not return (README: REST, POST /scripts/{module}/{entry}/run).
const (
	KindTimeout          = "timeout"               // the run passed its timeout and was killed (504)
	KindPermissionDenied = "permission_denied"     // a system.* call or the run itself was refused (403)
	KindRuntimeMissing   = "runtime_missing"       // no usable Python runtime (503)
	KindBusy             = "busy"                  // every worker busy and the queue full (503)
	KindMemory           = "memory_limit_exceeded" // the worker ran out of memory (500)
	KindKilled           = "killed"                // the worker died (500)
	KindScriptError      = "script_error"          // the script raised; Detail has the exception and line (422)
	KindInvalid          = "invalid"               // a bad module, entry or argument (400)
	KindNotFound         = "not_found"             // no such module or entry (404)
)

// ScriptError is a script save or run that did not return normally: Kind
// (one of the Kind* constants) and Detail, the message for the caller (the
// exception and its line, the missing scope, the timeout).
type ScriptError struct {
	Kind   string
	Detail string
}

// Error returns "kind: detail".
func (e *ScriptError) Error() string { return e.Kind + ": " + e.Detail }

// Problem is one problem of a refused project or tag import: the line in
// the document sent (0 when it has none) and the message, which names the
// tag or device and what is wrong.
type Problem struct {
	Line    int
	Message string
}

// ErrInvalidProject is what a *ProjectError is (errors.Is): the import was
// refused and nothing was applied.
var ErrInvalidProject = errors.New("project refused")

// ProjectError refuses a project or tag import: every problem found, in the
// order found. Nothing of the import was applied.
type ProjectError struct {
	Problems []Problem
}

// Error returns the messages, one per line.
func (e *ProjectError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	return strings.Join(msgs, "\n")
}

// Is reports ErrInvalidProject.
func (e *ProjectError) Is(target error) bool { return target == ErrInvalidProject }

// WideningError refuses a package install that was not acknowledged: it
// names every package the install would bring and what each widens in the
// script sandbox. The caller repeats it with the acknowledgement.
type WideningError struct {
	Widenings []PackageWidening
}

// Error names the packages.
func (e *WideningError) Error() string {
	s := "installing widens the script sandbox; repeat the request with acknowledge_widening: true:"
	for _, w := range e.Widenings {
		s += " " + w.Package
	}
	return s
}

// Kind names err's kind for a front door's wire: "unauthenticated",
// "permission_denied" (*auth.DeniedError), a *ScriptError's own kind,
// "invalid" (also a *ProjectError), "not_found", "conflict",
// "acknowledgement_required" (*WideningError), "unavailable",
// "install_failed", "timeout" (context.DeadlineExceeded), "canceled", and
// "internal" for anything else (whose text a front door should log, not
// send).
func Kind(err error) string {
	var (
		de *auth.DeniedError
		se *ScriptError
		pe *ProjectError
		we *WideningError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return se.Kind
	case errors.Is(err, ErrUnauthenticated):
		return "unauthenticated"
	case errors.As(err, &de):
		return KindPermissionDenied
	case errors.As(err, &we):
		return "acknowledgement_required"
	case errors.As(err, &pe), errors.Is(err, ErrInvalid):
		return KindInvalid
	case errors.Is(err, ErrNotFound):
		return KindNotFound
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrInstallFailed):
		return "install_failed"
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "internal"
}

// Why a credential was refused: CredentialError.Reason, and the reason
// of an "auth.refused" audit record (Audit.AuditCredentialRefusal).
const (
	CredentialMissing = "missing" // no Authorization: Bearer header
	CredentialUnknown = "unknown" // not a token of this appliance, or a wrong secret
	CredentialRevoked = "revoked" // the key was revoked
	CredentialExpired = "expired" // the key passed its expiry
	CredentialSession = "session" // a session cookie naming no current session (ended, expired, or forged)
)

// CredentialError is the error of Credentials.Authenticate for a refused
// token: it is ErrUnauthenticated (errors.Is) and says why, for the audit
// (a client is told the same for every reason).
type CredentialError struct {
	Reason string // CredentialUnknown, CredentialRevoked or CredentialExpired
}

// Error says the token was refused and why.
func (e *CredentialError) Error() string {
	return ErrUnauthenticated.Error() + ": " + e.Reason + " credentials"
}

// Unwrap makes it ErrUnauthenticated.
func (e *CredentialError) Unwrap() error { return ErrUnauthenticated }

// CredentialReason is the reason of a refused token's error:
// CredentialError's, else CredentialUnknown.
func CredentialReason(err error) string {
	var ce *CredentialError
	if errors.As(err, &ce) && ce.Reason != "" {
		return ce.Reason
	}
	return CredentialUnknown
}

// kindError is an error of a kind whose text is its own message only.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Errorf returns an error of kind (one of the sentinels above:
// errors.Is(err, kind) holds) whose text is the formatted message alone,
// without the kind's own words: a front door shows the kind beside the
// message (REST's status and "kind", the CLI's "(HTTP 409, conflict)"), so
// `user "bob" already exists` is not also "conflict: ...". A %w in format
// wraps as fmt.Errorf does.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// kinds are the sentinels whose words Message takes off the front of a
// message.
var kinds = []error{ErrUnauthenticated, ErrInvalid, ErrNotFound, ErrConflict, ErrUnavailable, ErrInstallFailed}

// Message is err's text for a front door that shows err's kind beside it
// (REST's problem "title" and "kind", the CLI's "(HTTP 404, not_found)"):
// a leading label of the kind err is ("invalid request: ", "conflict: ",
// "not found: "), which operations wrapping a sentinel with "%w: ..."
// write, is taken off, so the kind is not said twice. Any other text is
// kept as it is.
func Message(err error) string {
	msg := err.Error()
	for _, k := range kinds {
		if errors.Is(err, k) {
			msg = strings.TrimPrefix(msg, k.Error()+": ")
		}
	}
	return msg
}
