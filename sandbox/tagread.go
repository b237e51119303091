package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/rpc"
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
// and encodes the answer as columns, the value of a binary result frame
// (METHODS.md; rpc.Pickle).
func readTagColumns(ctx context.Context, r TagReader, g auth.Grant, params json.RawMessage) ([]byte, error) {
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

// encodeColumns encodes VQTs as the column answer of tag.read, one tuple
// in the pickle subset of binary result frames (rpc.Pickle):
//
//	([values], "Good" | ["Good", ...], "<time>" | ["<time>", ...], None | {index: "<reason>"})
//
// quality and time are one str when every row has the same; the reasons
// are None unless a row has one. Values are what json.loads makes of the
// same value written as JSON: ints exact, floats as floats, NaN and the
// infinities as None.
func encodeColumns(vqts []value.VQT) ([]byte, error) {
	p := rpc.Pickle{B: make([]byte, 0, 64+len(vqts)*12)}
	p.BeginTuple()
	p.BeginList()
	for i, v := range vqts {
		if err := appendValue(&p, v.Value, 0); err != nil {
			return nil, fmt.Errorf("tag.read: value %d: %w", i, err)
		}
	}
	p.EndList()
	sameQ, sameT := true, true
	for i := 1; i < len(vqts); i++ {
		sameQ = sameQ && vqts[i].Quality == vqts[0].Quality
		sameT = sameT && vqts[i].Time.Equal(vqts[0].Time)
	}
	switch {
	case len(vqts) == 0:
		p.BeginList()
		p.EndList()
	case sameQ:
		p.String(vqts[0].Quality.String())
	default:
		p.BeginList()
		for _, v := range vqts {
			p.String(v.Quality.String())
		}
		p.EndList()
	}
	switch {
	case len(vqts) == 0:
		p.BeginList()
		p.EndList()
	case sameT:
		p.String(timeText(vqts[0].Time))
	default:
		p.BeginList()
		for _, v := range vqts {
			p.String(timeText(v.Time))
		}
		p.EndList()
	}
	first := true
	for i, v := range vqts {
		if v.Reason == "" {
			continue
		}
		if first {
			p.BeginDict()
			first = false
		}
		p.Int(int64(i))
		p.String(v.Reason)
	}
	if first {
		p.None()
	} else {
		p.EndDict()
	}
	p.EndTuple()
	return p.B, nil
}

// timeText is t in TimeFormat, UTC.
func timeText(t time.Time) string {
	if y := t.Year(); y < 1900 || y > 2200 { // outside UnixNano's range: no cache
		return t.UTC().Format(TimeFormat)
	}
	ns := t.UnixNano()
	if c := lastTime.Load(); c != nil && c.ns == ns {
		return c.s
	}
	s := t.UTC().Format(TimeFormat)
	lastTime.Store(&formattedTime{ns: ns, s: s})
	return s
}

// formattedTime is one instant and its text in TimeFormat.
type formattedTime struct {
	ns int64
	s  string
}

// lastTime caches the instant timeText formatted last: the tags of one
// scan share their timestamp, and a script polling them reads the same one
// until the next scan, so most reads format no time at all.
var lastTime atomic.Pointer[formattedTime]

// appendValue appends a tag value (value.Normalize form).
func appendValue(p *rpc.Pickle, v value.Value, depth int) error {
	switch x := value.Normalize(v).(type) {
	case nil:
		p.None()
	case bool:
		p.Bool(x)
	case int64:
		p.Int(x)
	case uint64:
		p.Uint(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			p.None()
		} else {
			p.Float(x)
		}
	case string:
		p.String(x)
	case []any:
		if depth >= 100 {
			return errors.New("array nested deeper than 100")
		}
		p.BeginList()
		for _, e := range x {
			if err := appendValue(p, e, depth+1); err != nil {
				return err
			}
		}
		p.EndList()
	default:
		return fmt.Errorf("%T is not a tag value", v)
	}
	return nil
}
