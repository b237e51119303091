package gateway

import (
	"context"
	"time"

	"qubiq.dev/edge/auth"
)

// The operations the engineer's console needs beyond the other groups
// (docs/console.md): a module's stored source, by version, for the
// editor and its diff; and a filtered search of the audit log, newest
// first.

// ScriptCodes reads the stored source of script modules.
type ScriptCodes interface {
	// ScriptCode returns version of module with its source; version 0 is
	// the latest (the one that runs). An unknown module or version wraps
	// ErrNotFound; a bad module name ErrInvalid (CheckName).
	ScriptCode(ctx context.Context, g auth.Grant, module string, version int64) (ScriptCode, error)
}

// ScriptCode is one stored version of a module: its number, when it was
// saved (UTC) and its Python source.
type ScriptCode struct {
	Module  string
	Version int64
	Saved   time.Time
	Code    string
}

// AuditSearcher searches the audit log.
type AuditSearcher interface {
	// SearchAudit returns the records that match q, newest first, at
	// most q.Limit (1 to MaxAuditSearch; 0 means 100; more is ErrInvalid).
	// Records still queued are committed first, so an action's record
	// shows in a search made right after it. The search looks through at
	// most AuditSearchScan of the newest records below q.Before.
	SearchAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
}

// Bounds of SearchAudit.
const (
	// MaxAuditSearch is the most records one search returns.
	MaxAuditSearch = 1000
	// AuditSearchScan is how many of the newest records one search looks
	// through at most, so a search on a large log answers in bounded time.
	AuditSearchScan = 50000
)

// AuditQuery selects audit records: each non-zero field must match.
// Principal and Result match exactly; Origin and Action match a whole
// prefix up to ":" or "." ("liveview" matches "liveview:pump1", "script"
// matches "script.run" and "script.save", "tag.write" matches itself);
// Since and Until bound the record's time (inclusive, UTC); Before keeps
// records whose sequence number is below it (the paging cursor: the last
// sequence number of the previous page). Limit caps the answer.
type AuditQuery struct {
	Principal string
	Origin    string
	Action    string
	Result    string
	Since     time.Time
	Until     time.Time
	Before    uint64
	Limit     int
}

// Matches reports whether rec is selected by q (its Before, time and text
// filters; Limit is the caller's).
func (q AuditQuery) Matches(rec AuditRecord) bool {
	switch {
	case q.Before != 0 && rec.Seq >= q.Before:
		return false
	case q.Principal != "" && rec.Principal != q.Principal:
		return false
	case q.Result != "" && rec.Result != q.Result:
		return false
	case !q.Since.IsZero() && rec.Time.Before(q.Since):
		return false
	case !q.Until.IsZero() && rec.Time.After(q.Until):
		return false
	}
	return segmentPrefix(rec.Origin, q.Origin, ':') && segmentPrefix(rec.Action, q.Action, '.')
}

// segmentPrefix reports whether v is p, or starts with p followed by sep
// (an empty p matches anything).
func segmentPrefix(v, p string, sep byte) bool {
	if p == "" || v == p {
		return true
	}
	return len(v) > len(p) && v[:len(p)] == p && v[len(p)] == sep
}
