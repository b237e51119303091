package apitypes

import (
	"encoding/json"
	"fmt"
	"time"

	"qubiq.dev/edge/value"
)

// Wire types of the system.* data routes (issue 4; docs/api.md, REST routes
// /db/named, /history, /vars, /files, /messages).

// NamedQueryRequest is the body of POST /api/v1/db/named/{name}: the
// query's parameters by name (JSON values; timestamps as RFC 3339 strings,
// bytes as base64 strings) and, optionally, another connection than the
// query's own.
type NamedQueryRequest struct {
	Params   json.RawMessage `json:"params,omitempty"`
	Database string          `json:"database,omitempty"`
}

// NamedQueryResult is the answer of POST /api/v1/db/named/{name}: the rows,
// each an object of column → value in column order (timestamps RFC 3339
// UTC, bytes base64).
type NamedQueryResult struct {
	Rows json.RawMessage `json:"rows"`
}

// HistoryQuery is GET /api/v1/history's query: path (repeated), start and
// end (RFC 3339; end defaults to now), interval_ms (required unless
// aggregate is raw) and aggregate (raw, avg, min, max, first, last,
// count; default raw).
type HistoryQuery struct {
	Paths      []string
	Start, End time.Time
	IntervalMS int64
	Aggregate  string
}

// HistorySeries is one path's answer of GET /api/v1/history: its points in
// time order, the number of bad-quality samples in the range (excluded from
// aggregates), and whether the path ever recorded history.
type HistorySeries struct {
	Path       string         `json:"path"`
	Aggregate  string         `json:"aggregate"`
	IntervalMS *int64         `json:"interval_ms"`
	Points     []HistoryPoint `json:"points"`
	Bad        int            `json:"bad"`
	Known      bool           `json:"known"`
}

// HistoryPoint is one raw sample, or one interval's aggregate stamped with
// the interval's start. StatusCode is a raw sample's OPC UA status code
// (omitted when 0), so that a status change alone shows in history.
type HistoryPoint struct {
	Timestamp  time.Time
	Value      value.Value
	Quality    string
	StatusCode uint32
}

type historyPointWire struct {
	Timestamp  string          `json:"timestamp"`
	Value      json.RawMessage `json:"value"`
	Quality    string          `json:"quality"`
	StatusCode uint32          `json:"status_code,omitempty"`
}

// MarshalJSON encodes {"timestamp", "value", "quality", "status_code"?} with the value
// exact (EncodeValue) and the time in UTC.
func (p HistoryPoint) MarshalJSON() ([]byte, error) {
	raw, err := EncodeValue(p.Value)
	if err != nil {
		return nil, fmt.Errorf("history point at %s: %w", p.Timestamp.UTC().Format(TimeFormat), err)
	}
	return json.Marshal(historyPointWire{Timestamp: p.Timestamp.UTC().Format(TimeFormat), Value: raw, Quality: p.Quality, StatusCode: p.StatusCode})
}

// UnmarshalJSON decodes the wire form (for clients).
func (p *HistoryPoint) UnmarshalJSON(b []byte) error {
	var w historyPointWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := DecodeValue(w.Value)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, w.Timestamp)
	if err != nil {
		return err
	}
	*p = HistoryPoint{Timestamp: t, Value: v, Quality: w.Quality, StatusCode: w.StatusCode}
	return nil
}

// VarValue is a system.vars entry: the answer of GET, PUT and POST .../incr
// on /api/v1/vars/{key}.
type VarValue struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// VarPut is the body of PUT /api/v1/vars/{key}.
type VarPut struct {
	Value json.RawMessage `json:"value"`
}

// VarIncr is the body of POST /api/v1/vars/{key}/incr; by defaults to 1.
type VarIncr struct {
	By json.Number `json:"by,omitempty"`
}

// FileSaved is the answer of PUT /api/v1/files/{path}.
type FileSaved struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// MessageRequest is the body of POST /api/v1/messages/{handler}; the
// answer is a ScriptRun of the handler.
type MessageRequest struct {
	Payload json.RawMessage `json:"payload,omitempty"`
}
