package store

import (
	"strconv"
	"time"

	"qubiq.dev/edge/value"
)

// appendVQT appends vqt's record (vqtRecord) to buf, byte for byte what
// encodeVQT writes, without reflection or an allocation per record: the
// tag engine persists every changed tag this way. A record with a part
// the fast path does not spell itself (an unnamed quality, a time outside
// the years 0–9999, a reason that needs escaping) goes through encodeVQT.
func appendVQT(buf []byte, vqt value.VQT) ([]byte, error) {
	v := value.Normalize(vqt.Value)
	var lk leafKinds
	if err := lk.scan(v); err != nil {
		return buf, err
	}
	q := vqt.Quality.String()
	t := vqt.Time.UTC()
	if !plainJSON(q) || !plainJSON(vqt.Reason) || t.Year() < 0 || t.Year() > 9999 {
		b, err := encodeVQT(vqt)
		if err != nil {
			return buf, err
		}
		return append(buf, b...), nil
	}
	k := ""
	switch {
	case lk.nonFinite > 0:
		if lk.ints+lk.uints > 0 || lk.nonFiniteNames > 0 {
			_, err := encodeVQT(vqt) // the same refusal, worded once
			return buf, err
		}
		k = kindFloat
	case lk.smallUints > 0 && lk.ints == 0:
		k = kindUint
	}
	buf = append(buf, `{"v":`...)
	buf = appendValue(buf, v)
	buf = append(buf, `,"q":"`...)
	buf = append(buf, q...)
	buf = append(buf, `","t":"`...)
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, '"')
	if vqt.Reason != "" {
		buf = append(buf, `,"r":"`...)
		buf = append(buf, vqt.Reason...)
		buf = append(buf, '"')
	}
	if vqt.StatusCode != 0 {
		buf = append(buf, `,"sc":`...)
		buf = strconv.AppendUint(buf, uint64(vqt.StatusCode), 10)
	}
	if k != "" {
		buf = append(buf, `,"k":"`...)
		buf = append(buf, k...)
		buf = append(buf, '"')
	}
	return append(buf, '}'), nil
}

// plainJSON reports whether s is written in JSON as itself between quotes
// by encoding/json: printable ASCII without a quote, a backslash or one
// of the characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
