package api

import (
	"context"
	"encoding/json"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// Data is the system.* data services as REST sees them (issue 4; DESIGN.md
// route table: /db/named, /history, /vars, /files, /messages): the same
// services scripts call, with the same scopes (checked by the route table)
// and the same audit. g is the caller's grant. Errors: ErrInvalid (400),
// ErrNotFound (404), *auth.DeniedError (403: a path outside the grant's
// prefixes or the files root, a named query that tried to write), a
// ScriptError for a message handler's run; anything else is a 500.
type Data interface {
	// RunNamedQuery runs the named query name with params (a JSON object)
	// on database ("" is the query's own) read-only and returns the rows
	// as a JSON array of objects (timestamps RFC 3339, bytes base64).
	RunNamedQuery(ctx context.Context, g auth.Grant, name string, params json.RawMessage, database string) (json.RawMessage, error)
	// History answers a history query, one series per path in order.
	History(ctx context.Context, g auth.Grant, q apitypes.HistoryQuery) ([]apitypes.HistorySeries, error)
	// GetVar returns key's JSON value; an absent key wraps ErrNotFound.
	GetVar(ctx context.Context, g auth.Grant, key string) (json.RawMessage, error)
	// SetVar stores value under key, committed before it returns.
	SetVar(ctx context.Context, g auth.Grant, key string, value json.RawMessage) error
	// DeleteVar removes key; an absent key wraps ErrNotFound.
	DeleteVar(ctx context.Context, g auth.Grant, key string) error
	// IncrVar adds by to the number under key and returns the new value.
	IncrVar(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error)
	// ReadFile returns a file of the files root; length < 0 reads it
	// whole (up to the read limit), else up to length bytes from offset.
	ReadFile(ctx context.Context, g auth.Grant, path string, offset, length int64) ([]byte, error)
	// SaveFile writes a file of the files root atomically.
	SaveFile(ctx context.Context, g auth.Grant, path string, data []byte) error
	// DeleteFile removes a file of the files root; a missing one wraps
	// ErrNotFound.
	DeleteFile(ctx context.Context, g auth.Grant, path string) error
	// SendMessage runs the message handler with payload under g (never
	// more) and returns the run.
	SendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (apitypes.ScriptRun, error)
	// MaxFileBytes is the largest file SaveFile takes (the PUT route's
	// body limit).
	MaxFileBytes() int64
}
