package gateway

import (
	"context"
	"encoding/json"
	"time"

	"qubiq.dev/edge/auth"
)

// Scripts is the script store and the sandbox's runs. Saves and runs are
// audited ("script.save", "script.rollback", "script.run"). A save or run
// that did not return normally is a *ScriptError; module and entry names
// follow CheckName.
type Scripts interface {
	// SaveScript checks src.Code (syntax, the guardrail's names and
	// imports, @gateway timeouts read from the AST and clamped) and stores
	// it as a new version of src.Module, which runs from then on. With
	// src.Version 0 the version is the next one; a caller that numbers its
	// versions (an MQTT push: "version", an integer, rising) names it, and
	// a version at or below the module's latest is refused with
	// ErrConflict (a replayed or reordered push), nothing saved. Code that
	// fails the check is a *ScriptError of kind invalid with the
	// diagnostics' first message; nothing is saved.
	SaveScript(ctx context.Context, g auth.Grant, src ScriptSource) (ScriptSaved, error)
	// RollbackScript withdraws the latest version of module: the version
	// before it runs again (its number is the answer's Version) and the
	// withdrawn one is removed from the store; version numbers are never
	// reused. A module with one version wraps ErrConflict, an unknown one
	// ErrNotFound.
	RollbackScript(ctx context.Context, g auth.Grant, module string) (ScriptSaved, error)
	// ScriptVersions lists the stored versions of module, oldest first;
	// an unknown module wraps ErrNotFound.
	ScriptVersions(ctx context.Context, g auth.Grant, module string) ([]ScriptVersion, error)
	// RunScript runs module.entry with args (any JSON value; empty is
	// null) under g, with its origin set to "script:module.entry", until it
	// returns or its timeout; the run is audited. Tag writes the script
	// makes and that are refused show inside the result as statuses, not
	// as an error.
	RunScript(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (ScriptRun, error)
	// ListScripts lists the stored modules with their latest version.
	ListScripts(ctx context.Context, g auth.Grant) ([]ScriptInfo, error)
	// LintScript lints code with ruff, or a syntax-only check without it,
	// plus the guardrail's findings: reported as diagnostics, not refused.
	LintScript(ctx context.Context, code string) (LintResult, error)
}

// ScriptSource is a module's code to save, and the version the caller
// gives it (0: the next version).
type ScriptSource struct {
	Module  string
	Code    string
	Version int64
}

// ScriptSaved is a module's version now running: its number, its entries
// and the linter's diagnostics of its code.
type ScriptSaved struct {
	Module      string
	Version     int64
	Entries     []ScriptEntry
	Diagnostics []Diagnostic
}

// ScriptEntry is one entry of a module (a top-level function taking one
// argument) and its timeout (@gateway(timeout_ms=...) clamped to
// python.gateway_timeout, else its default).
type ScriptEntry struct {
	Name    string
	Timeout time.Duration
}

// ScriptRun is a run that returned: the entry's return value as JSON, the
// lines it logged and how long it ran.
type ScriptRun struct {
	Result   json.RawMessage
	Logs     []LogLine
	Duration time.Duration
}

// LogLine is one line a script logged: its level ("debug", "info",
// "warning", "error") and message.
type LogLine struct {
	Level string
	Msg   string
}

// ScriptInfo is one stored module: its latest version, its entries and
// the entries a LiveView button may start (the project's liveview list).
type ScriptInfo struct {
	Module   string
	Version  int64
	Entries  []ScriptEntry
	LiveView []string
}

// ScriptVersion is one stored version of a module and when it was saved
// (UTC).
type ScriptVersion struct {
	Version int64
	Saved   time.Time
}

// LintResult is the linter used ("ruff" or "syntax-only") and its
// diagnostics.
type LintResult struct {
	Linter      string
	Diagnostics []Diagnostic
}

// Diagnostic is one finding of the linter or of a save's check: 1-based
// lines and columns, the rule's code, the message and its severity
// ("error", "warning", "info").
type Diagnostic struct {
	Line      int
	Column    int
	EndLine   int
	EndColumn int
	Code      string
	Message   string
	Severity  string
}
