package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// TagReader is an optional interface of Services: the fast path of
// system.tag.read (METHODS.md). When the Services given to New implement
// it, the dispatcher calls ReadTags instead of Call("tag.read") and sends
// the worker a column-oriented answer it encodes itself, which costs both
// sides a fraction of the row form (bench/README.md, B4).
//
// ReadTags returns one VQT per path, in order, for grant g (whose tag:read
// scope the dispatcher has checked): an unknown path is Bad_NodeIdUnknown,
// a path outside g's prefixes Bad_UserAccessDenied, as Call("tag.read")
// answers them. An error fails the whole call (the script gets
// system.CallError, or system.PermissionDenied for an *auth.DeniedError).
type TagReader interface {
	ReadTags(ctx context.Context, g auth.Grant, paths []string) ([]value.VQT, error)
}

// TimeFormat is the layout of the timestamps sent to workers: RFC 3339,
// UTC, nanoseconds (the API's).
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// readTagColumns serves tag.read through r: it parses {"paths": [...]}
// and encodes the answer as columns (METHODS.md).
func readTagColumns(ctx context.Context, r TagReader, g auth.Grant, params json.RawMessage) (json.RawMessage, error) {
	paths, err := parsePaths(params)
	if err != nil {
		return nil, fmt.Errorf("tag.read: bad params: %w", err)
	}
	vqts, err := r.ReadTags(ctx, g, paths)
	if err != nil {
		return nil, err
	}
	if len(vqts) != len(paths) {
		return nil, fmt.Errorf("tag.read: %d values for %d paths", len(vqts), len(paths))
	}
	return encodeColumns(vqts)
}

// parsePaths reads {"paths": ["a", "b"]} as the worker writes it (compact,
// no escapes) without reflection, and anything else with encoding/json.
func parsePaths(b []byte) ([]string, error) {
	const head = `{"paths":[`
	if len(b) >= len(head)+2 && string(b[:len(head)]) == head && string(b[len(b)-2:]) == "]}" {
		body := b[len(head) : len(b)-2]
		n := 0
		for _, c := range body {
			if c == '"' {
				n++
			}
		}
		out := make([]string, 0, n/2)
		i := 0
		ok := true
		for i < len(body) && ok {
			if body[i] != '"' {
				ok = false
				break
			}
			j := i + 1
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' || body[j] < 0x20 {
					ok = false
					break
				}
				j++
			}
			if !ok || j >= len(body) {
				ok = false
				break
			}
			out = append(out, string(body[i+1:j]))
			i = j + 1
			if i < len(body) {
				if body[i] != ',' {
					ok = false
					break
				}
				i++
				if i == len(body) {
					ok = false
				}
			}
		}
		if ok {
			return out, nil
		}
	}
	var p struct {
		Paths *[]string `json:"paths"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	if p.Paths == nil {
		return nil, errors.New(`missing "paths"`)
	}
	return *p.Paths, nil
}

// encodeColumns encodes VQTs as the column answer of tag.read:
//
//	{"v": [values], "q": "Good" | ["Good", ...], "t": "<time>" | ["<time>", ...], "r": {"<index>": "<reason>"}}
//
// q and t are one string when every row has the same; r is present only
// when a row has a reason. Values are JSON: integers exact, floats always
// with a fraction or exponent (so Python reads a float), NaN and infinities
// as null.
func encodeColumns(vqts []value.VQT) (json.RawMessage, error) {
	b := make([]byte, 0, 64+len(vqts)*48)
	b = append(b, `{"v":[`...)
	for i, v := range vqts {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendValue(b, v.Value); err != nil {
			return nil, fmt.Errorf("tag.read: value %d: %w", i, err)
		}
	}
	b = append(b, `],"q":`...)
	sameQ, sameT := true, true
	for i := 1; i < len(vqts); i++ {
		sameQ = sameQ && vqts[i].Quality == vqts[0].Quality
		sameT = sameT && vqts[i].Time.Equal(vqts[0].Time)
	}
	switch {
	case len(vqts) == 0:
		b = append(b, "[]"...)
	case sameQ:
		b = appendString(b, vqts[0].Quality.String())
	default:
		b = append(b, '[')
		for i, v := range vqts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v.Quality.String())
		}
		b = append(b, ']')
	}
	b = append(b, `,"t":`...)
	switch {
	case len(vqts) == 0:
		b = append(b, "[]"...)
	case sameT:
		b = appendTime(b, vqts[0].Time)
	default:
		b = append(b, '[')
		for i, v := range vqts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTime(b, v.Time)
		}
		b = append(b, ']')
	}
	first := true
	for i, v := range vqts {
		if v.Reason == "" {
			continue
		}
		if first {
			b = append(b, `,"r":{`...)
			first = false
		} else {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `":`...)
		b = appendString(b, v.Reason)
	}
	if !first {
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	if y := t.Year(); y < 1900 || y > 2200 { // outside UnixNano's range: no cache
		b = t.UTC().AppendFormat(b, TimeFormat)
		return append(b, '"')
	}
	ns := t.UnixNano()
	if c := lastTime.Load(); c != nil && c.ns == ns {
		b = append(b, c.s...)
	} else {
		n := len(b)
		b = t.UTC().AppendFormat(b, TimeFormat)
		lastTime.Store(&formattedTime{ns: ns, s: string(b[n:])})
	}
	return append(b, '"')
}

// formattedTime is one instant and its text in TimeFormat.
type formattedTime struct {
	ns int64
	s  string
}

// lastTime caches the instant appendTime formatted last: the tags of one
// scan share their timestamp, and a script polling them reads the same one
// until the next scan, so most reads format no time at all.
var lastTime atomic.Pointer[formattedTime]

// appendValue appends a tag value (value.Normalize form) as JSON.
func appendValue(b []byte, v value.Value) ([]byte, error) {
	switch x := value.Normalize(v).(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case float64:
		return appendFloat(b, x), nil
	case string:
		return appendString(b, x), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default:
		return nil, fmt.Errorf("%T is not a tag value", v)
	}
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	for _, c := range b[start:] {
		if c == '.' || c == 'e' || c == 'E' {
			return b
		}
	}
	return append(b, ".0"...)
}

// appendString appends s as a JSON string. Plain printable ASCII (the
// common case: paths, quality names, reasons) is copied as it is.
func appendString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, err := json.Marshal(s) // invalid UTF-8 becomes U+FFFD; never fails for a string
	if err != nil {
		return append(b, `""`...)
	}
	return append(b, q...)
}
