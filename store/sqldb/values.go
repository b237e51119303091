package sqldb

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped when an argument, a parameter or a request cannot
// be used: a wrong type, a missing or unknown parameter, an unknown
// connection or named query.
var ErrInvalid = errors.New("invalid argument")

// Tagged JSON forms of values JSON has no type for (sandbox/METHODS.md):
//
//	{"$dt": "2025-03-01T12:00:00.5Z"}   a timestamp, RFC 3339, UTC
//	{"$bytes": "AAEC"}                  bytes, standard base64
//	{"$float": "nan" | "inf" | "-inf"}  a float JSON cannot hold
const (
	tagDT    = "$dt"
	tagBytes = "$bytes"
	tagFloat = "$float"
)

// DecodeArg decodes one argument of runQuery/callProc from JSON: null,
// bool, a number (int64 when integral and in range, else float64), a
// string, or a tagged timestamp or bytes value. Arrays and other objects
// are refused (wrapping ErrInvalid): pass JSON columns as text.
func DecodeArg(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, fmt.Errorf("empty argument: %w", ErrInvalid)
	}
	switch raw[0] {
	case 'n':
		return nil, nil
	case 't', 'f':
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("argument %s: %w", raw, ErrInvalid)
		}
		return b, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("argument %.40s: %w", raw, ErrInvalid)
		}
		return s, nil
	case '{':
		return decodeTagged(raw)
	case '[':
		return nil, fmt.Errorf("argument %.40s: arrays are not supported as SQL arguments: %w", raw, ErrInvalid)
	}
	return decodeNumber(string(raw))
}

func decodeNumber(s string) (any, error) {
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("argument %.40s is not JSON: %w", s, ErrInvalid)
	}
	if !strings.ContainsAny(s, ".eE") {
		n, ok := new(big.Int).SetString(s, 10)
		if !ok || !n.IsInt64() {
			return nil, fmt.Errorf("integer %s is outside int64: %w", s, ErrInvalid)
		}
		return n.Int64(), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", s, ErrInvalid)
	}
	return f, nil
}

func decodeTagged(raw json.RawMessage) (any, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nil, fmt.Errorf(`argument %.60s: objects other than {"$dt": ...}, {"$bytes": ...} or {"$float": ...} are not supported: %w`, raw, ErrInvalid)
	}
	for k, v := range m {
		switch k {
		case tagDT:
			t, err := parseTime(v)
			if err != nil {
				return nil, err
			}
			return t, nil
		case tagBytes:
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, fmt.Errorf("$bytes: not standard base64: %w", ErrInvalid)
			}
			return b, nil
		case tagFloat:
			switch strings.ToLower(v) {
			case "nan":
				return math.NaN(), nil
			case "inf", "+inf", "infinity":
				return math.Inf(1), nil
			case "-inf", "-infinity":
				return math.Inf(-1), nil
			}
			return nil, fmt.Errorf("$float %q: want nan, inf or -inf: %w", v, ErrInvalid)
		}
	}
	return nil, fmt.Errorf("argument %.60s: unknown tag: %w", raw, ErrInvalid)
}

// parseTime parses an RFC 3339 timestamp (a zone is required) into UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q is not RFC 3339 with a zone (2025-03-01T12:00:00Z): %w", s, ErrInvalid)
	}
	return t.UTC(), nil
}

// DecodeArgs decodes a JSON array of arguments (null or absent: none).
func DecodeArgs(raw json.RawMessage) ([]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("args must be a list: %w", ErrInvalid)
	}
	out := make([]any, len(items))
	for i, it := range items {
		v, err := DecodeArg(it)
		if err != nil {
			return nil, fmt.Errorf("args[%d]: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// convertParam converts a named query parameter to its declared type.
// JSON null is SQL NULL for every type. Timestamps take {"$dt"} or an RFC
// 3339 string; bytes take {"$bytes"} or a base64 string.
func convertParam(name string, t ParamType, raw json.RawMessage) (any, error) {
	bad := func(want string) error {
		return fmt.Errorf("parameter %q: want %s (declared %s), have %.40s: %w", name, want, t, raw, ErrInvalid)
	}
	v, err := DecodeArg(raw)
	if err != nil {
		return nil, fmt.Errorf("parameter %q: %w", name, err)
	}
	if v == nil {
		return nil, nil
	}
	switch t {
	case ParamInt:
		if i, ok := v.(int64); ok {
			return i, nil
		}
		return nil, bad("an integer")
	case ParamFloat:
		switch x := v.(type) {
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		}
		return nil, bad("a number")
	case ParamString:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, bad("a string")
	case ParamBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, bad("true or false")
	case ParamBytes:
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			b, err := base64.StdEncoding.DecodeString(x)
			if err == nil {
				return b, nil
			}
		}
		return nil, bad(`bytes ({"$bytes": base64} or a base64 string)`)
	case ParamTimestamp:
		switch x := v.(type) {
		case time.Time:
			return x, nil
		case string:
			return parseTime(x)
		}
		return nil, bad(`a timestamp ({"$dt": RFC 3339} or an RFC 3339 string)`)
	}
	return nil, bad(string(t))
}

// Result is what a statement gave: rows (Columns, Types as the database
// names them, Rows of nil, bool, int64, float64, string, []byte, time.Time
// or json.RawMessage) or, for a statement without rows, RowsAffected.
type Result struct {
	Columns      []string
	Types        []string
	Rows         [][]any
	RowsAffected int64
	Statement    bool // true: a statement without rows; RowsAffected holds its count
}

// Mode chooses how Encode writes values JSON has no type for.
type Mode int

const (
	// ModeScript writes timestamps, bytes and non-finite floats as tagged
	// objects ({"$dt"}, {"$bytes"}, {"$float"}), which the Python side
	// turns into aware datetimes, bytes and floats.
	ModeScript Mode = iota
	// ModeREST writes timestamps as RFC 3339 strings (docs/api.md, REST) and
	// bytes as base64 strings.
	ModeREST
)

// Encode returns the result as JSON: a statement's RowsAffected as a
// number, rows as a list of objects whose keys are the column names in
// column order (a repeated name keeps its first position and last value,
// as a Python dict would).
func (r *Result) Encode(mode Mode) (json.RawMessage, error) {
	if r.Statement {
		return json.RawMessage(strconv.FormatInt(r.RowsAffected, 10)), nil
	}
	// Column order with repeated names folded.
	first := map[string]int{}
	var cols []string
	pick := make([]int, len(r.Columns)) // column → slot
	for i, c := range r.Columns {
		if j, ok := first[c]; ok {
			pick[i] = j
			continue
		}
		first[c] = len(cols)
		pick[i] = len(cols)
		cols = append(cols, c)
	}
	keys := make([][]byte, len(cols))
	for i, c := range cols {
		k, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	var b bytes.Buffer
	b.WriteByte('[')
	slot := make([]any, len(cols))
	for ri, row := range r.Rows {
		if ri > 0 {
			b.WriteByte(',')
		}
		for i, v := range row {
			slot[pick[i]] = v
		}
		b.WriteByte('{')
		for i := range cols {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(keys[i])
			b.WriteByte(':')
			if err := appendJSON(&b, slot[i], mode); err != nil {
				return nil, fmt.Errorf("row %d, column %q: %w", ri, cols[i], err)
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

func appendJSON(b *bytes.Buffer, v any, mode Mode) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString(`{"$float":"nan"}`)
		case math.IsInf(x, 1):
			b.WriteString(`{"$float":"inf"}`)
		case math.IsInf(x, -1):
			b.WriteString(`{"$float":"-inf"}`)
		default:
			s := strconv.FormatFloat(x, 'g', -1, 64)
			if !strings.ContainsAny(s, ".eEn") {
				s += ".0" // stays a float on the Python side
			}
			b.WriteString(s)
		}
	case string:
		enc, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(enc)
	case []byte:
		s := base64.StdEncoding.EncodeToString(x)
		if mode == ModeScript {
			b.WriteString(`{"$bytes":"` + s + `"}`)
		} else {
			b.WriteString(`"` + s + `"`)
		}
	case time.Time:
		s := x.UTC().Format(time.RFC3339Nano)
		if mode == ModeScript {
			b.WriteString(`{"$dt":"` + s + `"}`)
		} else {
			b.WriteString(`"` + s + `"`)
		}
	case json.RawMessage:
		if !json.Valid(x) {
			return fmt.Errorf("JSON column value is not valid JSON")
		}
		b.Write(x)
	default:
		return fmt.Errorf("value of type %T", v)
	}
	return nil
}
