package gateway

import (
	"context"
	"encoding/json"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// Data is the data services scripts reach through system.* and the other
// front doors directly, with the same scopes (checked by the front door)
// and the same audit: one record per changing call and per refusal the
// service decides; reads write none. Refusals are *auth.DeniedError: a path
// outside the grant's prefixes (kind "prefix") or outside the files root
// ("path"), a named query that tried to write ("read_only"). A change whose
// audit record cannot be queued is refused (ErrUnavailable), nothing
// changed.
type Data interface {
	// RunNamedQuery runs a named query of the project read-only and
	// returns its rows as a JSON array of objects in column order, encoded
	// as q.Encoding says.
	RunNamedQuery(ctx context.Context, g auth.Grant, q NamedQuery) (json.RawMessage, error)
	// History answers a history query, one series per path in order.
	// Aggregates need an interval.
	History(ctx context.Context, g auth.Grant, q HistoryQuery) ([]HistorySeries, error)
	// GetVar returns key's JSON value; an absent key wraps ErrNotFound.
	GetVar(ctx context.Context, g auth.Grant, key string) (json.RawMessage, error)
	// SetVar stores v (any JSON) under key, committed before it returns.
	SetVar(ctx context.Context, g auth.Grant, key string, v json.RawMessage) error
	// DeleteVar removes key; an absent key wraps ErrNotFound (and is
	// audited as not having existed).
	DeleteVar(ctx context.Context, g auth.Grant, key string) error
	// IncrVar adds by (a JSON number; empty is 1) to the number under key
	// (absent is 0) and returns the new value: an integer stays an
	// integer, a float on either side gives a float; a value that is not a
	// number wraps ErrInvalid.
	IncrVar(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error)
	// VarKeys lists the keys beginning with prefix, sorted.
	VarKeys(ctx context.Context, g auth.Grant, prefix string) ([]string, error)
	// ListVars returns the vars whose keys begin with prefix, sorted by
	// key.
	ListVars(ctx context.Context, g auth.Grant, prefix string) ([]Var, error)
	// ReadFile returns a file of the files root: length < 0 reads it
	// whole (up to the read limit), else up to length bytes from offset
	// (shorter at the end, empty past it). A missing file wraps
	// ErrNotFound.
	ReadFile(ctx context.Context, g auth.Grant, path string, offset, length int64) ([]byte, error)
	// FileSize returns the size of a file of the files root in bytes.
	FileSize(ctx context.Context, g auth.Grant, path string) (int64, error)
	// SaveFile writes a file of the files root atomically (at most
	// MaxFileBytes), making its directories.
	SaveFile(ctx context.Context, g auth.Grant, path string, data []byte) error
	// DeleteFile removes a file of the files root; a missing one wraps
	// ErrNotFound.
	DeleteFile(ctx context.Context, g auth.Grant, path string) error
	// MaxFileBytes is the largest file SaveFile takes.
	MaxFileBytes() int64
	// SendMessage runs the project's message handler with payload (JSON;
	// empty is null) under g, never more (intersected with the handler's
	// restriction), and returns the run. An unknown handler wraps
	// ErrNotFound naming the handlers there are.
	SendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (ScriptRun, error)
}

// RowEncoding says how query rows are encoded as JSON.
type RowEncoding int

// Row encodings.
const (
	// RowsPlain writes timestamps as RFC 3339 strings and bytes as base64
	// strings (REST, MQTT).
	RowsPlain RowEncoding = iota
	// RowsTagged writes the tagged values of sandbox/METHODS.md:
	// {"$dt": ...}, {"$bytes": ...}, {"$float": "nan"} (scripts).
	RowsTagged
)

// NamedQuery asks for the named query Name with Params (a JSON object of
// its declared parameters) on Database ("" is the query's own).
type NamedQuery struct {
	Name     string
	Params   json.RawMessage
	Database string
	Encoding RowEncoding
}

// HistoryQuery asks for the recorded history of Paths from Start to End
// (zero: now): raw samples, or with Interval one point per interval of the
// Aggregate ("raw", "avg" time-weighted, "min", "max", "first", "last",
// "count"; "" is raw).
type HistoryQuery struct {
	Paths     []string
	Start     time.Time
	End       time.Time
	Interval  time.Duration
	Aggregate string
}

// HistorySeries is one path's answer: its aggregate and interval (0 for
// raw), the points, how many bad-quality samples the range holds, and
// whether the path has history at all.
type HistorySeries struct {
	Path      string
	Aggregate string
	Interval  time.Duration
	Points    []HistoryPoint
	Bad       int
	Known     bool
}

// HistoryPoint is one raw sample, or one interval's aggregate stamped with
// the interval's start (Quality Good, or Uncertain when bad samples were
// left out of it). StatusCode is a raw sample's OPC UA status code (0 for
// aggregates), so that a status change alone shows in history.
type HistoryPoint struct {
	Time       time.Time
	Value      value.Value
	Quality    value.Quality
	StatusCode uint32
}

// Var is one stored var: its key and JSON value.
type Var struct {
	Key   string
	Value json.RawMessage
}
