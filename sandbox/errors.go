package sandbox

import (
	"errors"
	"fmt"
)

// The kinds of a RunError: the "kind" of the REST problem document
// (docs/api.md, REST, POST /scripts/{module}/{entry}/run).
const (
	KindTimeout        = "timeout"               // the run passed its timeout; the worker was killed and replaced (504)
	KindPermission     = "permission_denied"     // a system.* call was refused and the script let it escape (403)
	KindRuntimeMissing = "runtime_missing"       // no usable Python runtime (503)
	KindBusy           = "busy"                  // every worker busy and the queue full (503, Retry-After)
	KindMemory         = "memory_limit_exceeded" // the worker hit its memory limit (500)
	KindKilled         = "killed"                // the worker died or was stopped for another reason (500)
	KindScriptError    = "script_error"          // the script raised (422)
	KindInvalid        = "invalid"               // unknown entry, bad args, code refused (400)
	KindNotFound       = "not_found"             // unknown module, as a rollback of it says (404)
)

// RunError is why Run or Check did not return a result. Kind is one of the
// Kind* constants, Detail a sentence for people (the exception text for
// script_error, the missing scope for permission_denied), Line the script
// line when known (0 otherwise).
type RunError struct {
	Kind   string
	Detail string
	Line   int
}

// Error returns "<kind>: <detail>" and the line when known.
func (e *RunError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", e.Kind, e.Detail, e.Line)
	}
	return e.Kind + ": " + e.Detail
}

// KindOf returns the Kind of err when it is (or wraps) a *RunError, else "".
func KindOf(err error) string {
	var re *RunError
	if errors.As(err, &re) {
		return re.Kind
	}
	return ""
}

func runErr(kind, format string, args ...any) *RunError {
	return &RunError{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
