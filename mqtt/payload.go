package mqtt

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"qubiq.dev/edge/value"
)

// The per-tag payload (docs/mqtt.md, Topics) is appended by hand: the
// bytes json.Marshal makes of tagMsg, without its reflection and
// allocations per value (payload_test.go holds the two equal).

// appendTagMsg appends the per-tag payload {"v","q","t","seq","reason"?}
// of tv to b; ts is the text of tv's time (stamp).
func appendTagMsg(b []byte, v value.Value, q value.Quality, ts string, seq uint64, reason string) []byte {
	b = append(b, `{"v":`...)
	b = appendValueJSON(b, v)
	b = append(b, `,"q":`...)
	b = appendJSONString(b, q.String())
	b = append(b, `,"t":`...)
	b = appendJSONString(b, ts)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	if reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, reason)
	}
	return append(b, '}')
}

// appendValueJSON appends v as value.EncodeJSON encodes it (null where it
// refuses the value, as the payload had); the common scalars directly.
func appendValueJSON(b []byte, v value.Value) []byte {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(b, "null"...)
		}
		return appendFloat(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case bool:
		return strconv.AppendBool(b, x)
	}
	raw, err := value.EncodeJSON(v)
	if err != nil || len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendFloat is encoding/json's float64 form: the shortest decimal,
// exponent form below 1e-6 and from 1e21, a one-digit negative exponent
// without its leading zero.
func appendFloat(b []byte, f float64) []byte {
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s as json.Marshal quotes it: directly when it
// holds nothing json.Marshal escapes, else through it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// stamper formats tag times as RFC 3339 UTC (stamp), once per instant: the
// values of one scan share their time.
type stamper struct {
	last time.Time
	text string
}

func (s *stamper) stamp(t time.Time) string {
	if s.text == "" || !t.Equal(s.last) {
		s.last, s.text = t, stamp(t)
	}
	return s.text
}
