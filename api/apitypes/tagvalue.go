package apitypes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"qubiq.dev/edge/value"
)

// TagValue is one element of the answer of POST /api/v1/tags/read: the tag's
// VQT (docs/api.md, REST and Quality). Value is the last known value (nil, sent
// as null, when there is none) in value.Normalize form; Quality is a quality
// name ("Good", "Bad_NodeIdUnknown", ...); Timestamp is sent in UTC
// (TimeFormat); Reason and the raw OPC UA StatusCode are omitted when empty.
// A float that is NaN or infinite, which JSON cannot hold, is sent as null.
type TagValue struct {
	Path       string
	Value      value.Value
	Quality    string
	Timestamp  time.Time
	Reason     string
	StatusCode uint32
	// ServerTimestamp is the OPC UA server timestamp, when there is one
	// (Timestamp is then the source timestamp).
	ServerTimestamp time.Time
}

type tagValueWire struct {
	Path       string          `json:"path"`
	Value      json.RawMessage `json:"value"`
	Quality    string          `json:"quality"`
	Timestamp  string          `json:"timestamp"`
	Reason     string          `json:"reason,omitempty"`
	StatusCode uint32          `json:"status_code,omitempty"`
	ServerTime string          `json:"server_timestamp,omitempty"`
}

// FromVQT returns the wire form of the VQT v of the tag at path.
func FromVQT(path string, v value.VQT) TagValue {
	return TagValue{Path: path, Value: v.Value, Quality: v.Quality.String(),
		Timestamp: v.Time, Reason: v.Reason, StatusCode: v.StatusCode, ServerTimestamp: v.ServerTime}
}

// MarshalJSON encodes t as {"path","value","quality","timestamp","reason"?,
// "status_code"?, "server_timestamp"?}, the value with int64/uint64 exact and the time in UTC.
func (t TagValue) MarshalJSON() ([]byte, error) {
	raw, err := EncodeValue(t.Value)
	if err != nil {
		return nil, fmt.Errorf("tag %q: %w", t.Path, err)
	}
	w := tagValueWire{Path: t.Path, Value: raw, Quality: t.Quality,
		Timestamp: t.Timestamp.UTC().Format(TimeFormat), Reason: t.Reason, StatusCode: t.StatusCode}
	if !t.ServerTimestamp.IsZero() {
		w.ServerTime = t.ServerTimestamp.UTC().Format(TimeFormat)
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the wire form; the value keeps int64/uint64 exact
// (DecodeValue). Unknown keys are ignored, so an older client reads a newer
// server's answer.
func (t *TagValue) UnmarshalJSON(b []byte) error {
	var w tagValueWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := DecodeValue(w.Value)
	if err != nil {
		return fmt.Errorf("tag %q: %w", w.Path, err)
	}
	var ts time.Time
	if w.Timestamp != "" {
		if ts, err = time.Parse(time.RFC3339Nano, w.Timestamp); err != nil {
			return fmt.Errorf("tag %q: timestamp %q is not RFC 3339", w.Path, w.Timestamp)
		}
	}
	*t = TagValue{Path: w.Path, Value: v, Quality: w.Quality, Timestamp: ts.UTC(),
		Reason: w.Reason, StatusCode: w.StatusCode}
	if w.ServerTime != "" {
		st, err := time.Parse(time.RFC3339Nano, w.ServerTime)
		if err != nil {
			return fmt.Errorf("tag %q: server_timestamp %q is not RFC 3339", w.Path, w.ServerTime)
		}
		t.ServerTimestamp = st.UTC()
	}
	return nil
}

// TagWrite is one element of WriteRequest.Writes: the tag path and the value
// to write, in value.Normalize form (integers stay int64 or uint64).
type TagWrite struct {
	Path  string      `json:"path"`
	Value value.Value `json:"value"`
}

// ErrMissingValue is returned by TagWrite.UnmarshalJSON when "value" is
// absent (an explicit null is a value: nil).
var ErrMissingValue = errors.New(`missing "value"`)

// UnmarshalJSON decodes {"path", "value"} strictly: an unknown key is an
// error naming it, an absent "value" is ErrMissingValue, and the value keeps
// int64/uint64 exact (DecodeValue). TagWrite is only ever decoded by the
// server, so it is as strict as the other request bodies.
func (t *TagWrite) UnmarshalJSON(b []byte) error {
	var w struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if w.Value == nil {
		return fmt.Errorf("tag %q: %w", w.Path, ErrMissingValue)
	}
	v, err := DecodeValue(w.Value)
	if err != nil {
		return fmt.Errorf("tag %q: %w", w.Path, err)
	}
	*t = TagWrite{Path: w.Path, Value: v}
	return nil
}

// ErrObjectValue is wrapped by DecodeValue when the JSON holds an object:
// tag values are numbers, bools, strings, null or arrays of them. It is
// value.ErrJSONObject.
var ErrObjectValue = value.ErrJSONObject

// DecodeValue decodes one JSON tag value into value.Normalize form, integers
// exact (value.DecodeJSON, the one JSON form of tag values). A number
// literal beyond float64's range (1e400), which no tag type holds, is
// refused as what it is, wrapping value.ErrOutOfRange: Normalize would
// keep it as the string "1e400", which a numeric tag then calls "not a
// number".
func DecodeValue(raw []byte) (value.Value, error) {
	v, err := value.DecodeJSON(raw)
	if err != nil || !hasString(v) {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var literal any
	if dec.Decode(&literal) == nil {
		if n, ok := hugeNumber(literal); ok {
			return nil, &HugeNumberError{Number: string(n)}
		}
	}
	return v, nil
}

// HugeNumberError is DecodeValue's refusal of a number literal beyond
// float64's range; it is value.ErrOutOfRange (errors.Is).
type HugeNumberError struct {
	Number string // the literal as sent, "1e400"
}

// Error names the number and the range.
func (e *HugeNumberError) Error() string {
	return fmt.Sprintf("%s is a number beyond float64's range (±%g), which no tag type holds", e.Number, math.MaxFloat64)
}

// Unwrap makes it value.ErrOutOfRange.
func (e *HugeNumberError) Unwrap() error { return value.ErrOutOfRange }

// hasString reports whether v is or holds a string.
func hasString(v value.Value) bool {
	switch x := v.(type) {
	case string:
		return true
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return hasString(e) })
	}
	return false
}

// hugeNumber finds a number literal in v (json.Number form) that float64
// cannot hold.
func hugeNumber(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		if f, err := strconv.ParseFloat(string(x), 64); errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
			return x, true
		}
	case []any:
		for _, e := range x {
			if n, ok := hugeNumber(e); ok {
				return n, true
			}
		}
	}
	return "", false
}

// EncodeValue encodes a tag value as JSON: integers exact, NaN and ±Inf as
// null (value.EncodeJSON, the one JSON form of tag values).
func EncodeValue(v value.Value) (json.RawMessage, error) { return value.EncodeJSON(v) }
