package store

import (
	"encoding/binary"
	"fmt"
	"math"
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

// A segment's record of one tag (lastvalues_seg.go) is binary when the
// value is a scalar: recBinary, the value's kind byte and the value, then
// the quality's contract name, the time (seconds since 1970 as a varint,
// nanoseconds as a uvarint, UTC), the reason and the status code. Strings
// and the name are uvarint-length-prefixed; floats are their IEEE 754
// bits, little-endian, so NaN and the infinities come back as stored.
// Any other value (an array, an integer beyond 64 bits) is vqtRecord's
// JSON, which starts with '{'.
const recBinary = 0xB1

// Value kinds of a binary record.
const (
	recFloat  = 'f'
	recInt    = 'i'
	recUint   = 'u'
	recTrue   = 'T'
	recFalse  = 'F'
	recString = 's'
)

// appendRecord appends vqt's segment record to buf: binary for a scalar
// value and a named quality, appendVQT's JSON otherwise. Its errors are
// appendVQT's (a value that cannot be stored).
func appendRecord(buf []byte, vqt value.VQT) ([]byte, error) {
	if vqt.Quality >= numNamedQualities {
		return appendVQT(buf, vqt)
	}
	start := len(buf)
	buf = append(buf, recBinary)
	switch x := value.Normalize(vqt.Value).(type) {
	case float64:
		buf = append(buf, recFloat)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
	case int64:
		buf = append(buf, recInt)
		buf = binary.AppendVarint(buf, x)
	case uint64:
		buf = append(buf, recUint)
		buf = binary.AppendUvarint(buf, x)
	case bool:
		if x {
			buf = append(buf, recTrue)
		} else {
			buf = append(buf, recFalse)
		}
	case string:
		buf = append(buf, recString)
		buf = appendRecString(buf, x)
	default:
		return appendVQT(buf[:start], vqt)
	}
	buf = appendRecString(buf, vqt.Quality.String())
	t := vqt.Time
	buf = binary.AppendVarint(buf, t.Unix())
	buf = binary.AppendUvarint(buf, uint64(t.Nanosecond()))
	buf = appendRecString(buf, vqt.Reason)
	return binary.AppendUvarint(buf, uint64(vqt.StatusCode)), nil
}

// numNamedQualities bounds the qualities with a contract name: a binary
// record stores the name, so a quality without one goes as JSON.
var numNamedQualities = func() value.Quality {
	var q value.Quality
	for ; q < 255; q++ {
		if _, err := value.ParseQuality(q.String()); err != nil {
			return q
		}
	}
	return q
}()

func appendRecString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// decodeRecord decodes a segment record written by appendRecord.
func decodeRecord(b []byte) (value.VQT, error) {
	if len(b) == 0 || b[0] != recBinary {
		return decodeVQT(b)
	}
	r := recReader{b: b[1:]}
	var vqt value.VQT
	kind := r.byte()
	switch kind {
	case recFloat:
		vqt.Value = math.Float64frombits(r.u64le())
	case recInt:
		vqt.Value = r.varint()
	case recUint:
		vqt.Value = r.uvarint()
	case recTrue:
		vqt.Value = true
	case recFalse:
		vqt.Value = false
	case recString:
		vqt.Value = r.string()
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown value kind %q", kind)
		}
	}
	q := r.string()
	sec := r.varint()
	nsec := r.uvarint()
	vqt.Reason = r.string()
	sc := r.uvarint()
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the record", len(r.b))
	}
	if r.err != nil {
		return value.VQT{}, fmt.Errorf("binary record: %w", r.err)
	}
	var err error
	if vqt.Quality, err = value.ParseQuality(q); err != nil {
		return value.VQT{}, fmt.Errorf("binary record: quality: %w", err)
	}
	if nsec >= 1e9 || sc > math.MaxUint32 {
		return value.VQT{}, fmt.Errorf("binary record: time or status code out of range")
	}
	vqt.Time = time.Unix(sec, int64(nsec)).UTC()
	vqt.StatusCode = uint32(sc)
	return vqt, nil
}

// recReader reads a binary record's fields; the first fault sticks in err
// and every later read returns zero.
type recReader struct {
	b   []byte
	err error
}

func (r *recReader) short(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated at the %s", what)
	}
	r.b = nil
}

func (r *recReader) byte() byte {
	if len(r.b) < 1 {
		r.short("value kind")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *recReader) u64le() uint64 {
	if len(r.b) < 8 {
		r.short("float")
		return 0
	}
	u := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return u
}

func (r *recReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.short("integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.short("integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.short("string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
