package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/value"
)

// SaveLastValues stores vals (tag path → VQT) in one transaction, replacing
// the stored VQT of each path given and leaving other paths alone. A value
// that cannot be stored (a path bbolt cannot key, a kind outside
// value.Value, see encodeVQT) never stops the others: they are stored, and
// the error is a *LastValuesError naming each one that was not (wrapping
// ErrInvalid). Only a failing transaction stores nothing.
func (db *DB) SaveLastValues(vals map[string]value.VQT) error {
	if len(vals) == 0 {
		return nil
	}
	paths := make([]string, 0, len(vals))
	for p := range vals {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	vqts := make([]value.VQT, len(paths))
	for i, p := range paths {
		vqts[i] = vals[p]
	}
	return db.PutLastValues(paths, vqts)
}

// PutLastValues is SaveLastValues for the tag engine's flush: paths[i]'s
// VQT is vals[i], the paths sorted and unique (a list in another order,
// or with a path twice, goes through SaveLastValues: sorted, the last VQT
// of a path kept). It keeps neither slice.
func (db *DB) PutLastValues(paths []string, vals []value.VQT) error {
	if len(paths) != len(vals) {
		return fmt.Errorf("store: put last values: %d paths, %d values: %w", len(paths), len(vals), ErrInvalid)
	}
	if len(paths) == 0 {
		return nil
	}
	if !strictlySorted(paths) {
		// A path twice in a segment would keep its stale entry for ever:
		// every later merge replaces only the first.
		m := make(map[string]value.VQT, len(paths))
		for i, p := range paths {
			m[p] = vals[i]
		}
		return db.SaveLastValues(m)
	}
	// Every change goes into one buffer, encoded in path order, of the
	// DB's scratch (lastvalues_scratch.go).
	need := 0
	for _, p := range paths {
		need += len(p) + 2 + 24 // a scalar's record is 13 to 24 bytes
	}
	s := db.lvScratch.take()
	s.reserve(len(paths), need)
	batch := &s.batch
	var failed map[string]error
	fail := func(p string, err error) {
		if failed == nil {
			failed = map[string]error{}
		}
		failed[p] = err
	}
	rec := s.rec
	for i, p := range paths {
		if err := checkKey("tag path", p); err != nil {
			fail(p, err)
			continue
		}
		r, err := appendRecord(rec[:0], vals[i])
		if err != nil {
			fail(p, fmt.Errorf("%w: %w", err, ErrInvalid))
			continue
		}
		rec = r
		batch.add(p, rec, false)
	}
	s.rec = rec
	if len(batch.ents) > 0 {
		err := db.update(func(tx *bolt.Tx) error { return db.applyLastValueChanges(tx, s) })
		if err != nil {
			db.lvScratch.give(s)
			return fmt.Errorf("store: save last values: %w", err)
		}
	}
	db.lvScratch.give(s)
	if len(failed) > 0 {
		return &LastValuesError{Failed: failed}
	}
	return nil
}

// strictlySorted reports whether every path is after the one before it.
func strictlySorted(paths []string) bool {
	for i := 1; i < len(paths); i++ {
		if paths[i] <= paths[i-1] {
			return false
		}
	}
	return true
}

// LastValuesError names the last values SaveLastValues could not store;
// the others of the call were stored.
type LastValuesError struct {
	Failed map[string]error // tag path → why
}

// Error names up to 5 of the tags and why (a long path shortened).
func (e *LastValuesError) Error() string {
	paths := e.FailedPaths()
	var b strings.Builder
	fmt.Fprintf(&b, "store: %d last value(s) not stored (the others were):", len(paths))
	for i, p := range paths {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(paths)-5)
			break
		}
		shown := p
		if len(shown) > 80 {
			shown = shown[:80] + "…"
		}
		fmt.Fprintf(&b, " %q: %v;", shown, e.Failed[p])
	}
	return strings.TrimSuffix(b.String(), ";")
}

// FailedPaths returns the paths not stored, sorted.
func (e *LastValuesError) FailedPaths() []string {
	out := make([]string, 0, len(e.Failed))
	for p := range e.Failed {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Unwrap returns ErrInvalid: the refused values are the caller's.
func (e *LastValuesError) Unwrap() error { return ErrInvalid }

// LoadLastValues returns every stored last value, by tag path: the
// segments' and, where a build before segments left newer ones in a
// store opened read-only, those of the per-tag records. A record that
// cannot be decoded fails the call with an error naming the tag.
func (db *DB) LoadLastValues() (map[string]value.VQT, error) {
	out := make(map[string]value.VQT)
	err := db.view(func(tx *bolt.Tx) error {
		if err := readSegments(tx, func(p, rec []byte) error {
			vqt, err := decodeRecord(rec)
			if err != nil {
				return fmt.Errorf("tag %q: %w", p, err)
			}
			out[string(p)] = vqt
			return nil
		}); err != nil {
			return err
		}
		b, err := bucket(tx, bucketLastValues)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			vqt, err := decodeVQT(v)
			if err != nil {
				return fmt.Errorf("tag %q: %w", k, err)
			}
			if have, ok := out[string(k)]; !ok || vqt.Time.After(have.Time) {
				out[string(k)] = vqt
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: load last values: %w", err)
	}
	return out, nil
}

// DeleteLastValues removes the stored last values of paths (tags removed
// from the project). Paths without a stored value are ignored.
func (db *DB) DeleteLastValues(paths ...string) error {
	if len(paths) == 0 {
		return nil
	}
	sorted := append([]string(nil), paths...)
	sort.Strings(sorted)
	s := db.lvScratch.take()
	changes := &s.batch
	kept := make([]string, 0, len(sorted))
	for i, p := range sorted {
		if p == "" || (i > 0 && p == sorted[i-1]) {
			continue
		}
		changes.add(p, nil, true)
		kept = append(kept, p)
	}
	err := db.update(func(tx *bolt.Tx) error {
		if err := db.applyLastValueChanges(tx, s); err != nil {
			return err
		}
		b, err := bucket(tx, bucketLastValues)
		if err != nil {
			return err
		}
		for _, p := range kept {
			if len(p) > bolt.MaxKeySize {
				continue // never a key
			}
			if err := b.Delete([]byte(p)); err != nil {
				return fmt.Errorf("tag %q: %w", p, err)
			}
		}
		return nil
	})
	db.lvScratch.give(s)
	if err != nil {
		return fmt.Errorf("store: delete last values: %w", err)
	}
	return nil
}

// vqtRecord is a VQT on disk: {"v","q","t","r","sc","k"}.
//
// v is the value as JSON. Floats are always written with a decimal point or
// an exponent ("3.0", "1e+21"), so they come back as float64, and integers
// never have one, so int64 and uint64 come back exact (decoded with
// UseNumber and value.Normalize).
//
// k, when present, says what plain JSON cannot:
//   - "u": every integer in v is a uint64 (a uint64 that fits an int64
//     would otherwise come back as int64).
//   - "f": every number in v is a float64, and the strings "NaN", "+Inf" and
//     "-Inf" in v are the non-finite floats (JSON has no spelling for them).
//
// An array mixing int64 and small uint64 elements has no k; its uint64
// elements come back as int64 (value.Equal then differs, value.Coerce to the
// tag's type restores them). An array mixing a non-finite float with other
// numeric kinds or with one of those three strings cannot be stored.
type vqtRecord struct {
	V  json.RawMessage `json:"v"`
	Q  value.Quality   `json:"q"`
	T  time.Time       `json:"t"`
	R  string          `json:"r,omitempty"`
	SC uint32          `json:"sc,omitempty"`
	K  string          `json:"k,omitempty"`
}

// Value kinds of vqtRecord.K.
const (
	kindUint  = "u"
	kindFloat = "f"
)

// leafKinds describes the leaves of a value.
type leafKinds struct {
	ints, uints, smallUints, floats, nonFinite, nonFiniteNames int
}

func (lk *leafKinds) scan(v value.Value) error {
	switch x := v.(type) {
	case nil, bool:
	case string:
		if x == "NaN" || x == "+Inf" || x == "-Inf" {
			lk.nonFiniteNames++
		}
	case int64:
		lk.ints++
	case uint64:
		lk.uints++
		if x <= math.MaxInt64 {
			lk.smallUints++
		}
	case float64:
		lk.floats++
		if math.IsNaN(x) || math.IsInf(x, 0) {
			lk.nonFinite++
		}
	case []any:
		for _, e := range x {
			if err := lk.scan(value.Normalize(e)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("value of Go type %T cannot be stored", v)
	}
	return nil
}

func encodeVQT(vqt value.VQT) ([]byte, error) {
	v := value.Normalize(vqt.Value)
	var lk leafKinds
	if err := lk.scan(v); err != nil {
		return nil, err
	}
	rec := vqtRecord{Q: vqt.Quality, T: vqt.Time.UTC(), R: vqt.Reason, SC: vqt.StatusCode}
	switch {
	case lk.nonFinite > 0:
		if lk.ints+lk.uints > 0 || lk.nonFiniteNames > 0 {
			return nil, fmt.Errorf("array mixes a non-finite float with integers or with the strings NaN/+Inf/-Inf")
		}
		rec.K = kindFloat
	case lk.smallUints > 0 && lk.ints == 0:
		rec.K = kindUint
	}
	rec.V = appendValue(nil, v)
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// appendValue writes v (normalised, checked by leafKinds.scan) as JSON.
func appendValue(buf []byte, v value.Value) []byte {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, x)
	case int64:
		return strconv.AppendInt(buf, x, 10)
	case uint64:
		return strconv.AppendUint(buf, x, 10)
	case float64:
		switch {
		case math.IsNaN(x):
			return append(buf, `"NaN"`...)
		case math.IsInf(x, 1):
			return append(buf, `"+Inf"`...)
		case math.IsInf(x, -1):
			return append(buf, `"-Inf"`...)
		}
		start := len(buf)
		buf = strconv.AppendFloat(buf, x, 'g', -1, 64)
		if !bytes.ContainsAny(buf[start:], ".e") {
			buf = append(buf, ".0"...)
		}
		return buf
	case string:
		b, _ := json.Marshal(x) // a string always marshals
		return append(buf, b...)
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendValue(buf, value.Normalize(e))
		}
		return append(buf, ']')
	}
	panic(fmt.Sprintf("store: appendValue: unchecked type %T", v))
}

func decodeVQT(b []byte) (value.VQT, error) {
	var rec vqtRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return value.VQT{}, err
	}
	var raw any
	if len(rec.V) > 0 {
		dec := json.NewDecoder(bytes.NewReader(rec.V))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return value.VQT{}, fmt.Errorf("value: %w", err)
		}
	}
	v, err := decodeValue(raw, rec.K)
	if err != nil {
		return value.VQT{}, fmt.Errorf("value: %w", err)
	}
	return value.VQT{Value: v, Quality: rec.Q, Time: rec.T, Reason: rec.R, StatusCode: rec.SC}, nil
}

func decodeValue(raw any, kind string) (value.Value, error) {
	switch x := raw.(type) {
	case nil, bool:
		return x, nil
	case string:
		if kind == kindFloat {
			switch x {
			case "NaN":
				return math.NaN(), nil
			case "+Inf":
				return math.Inf(1), nil
			case "-Inf":
				return math.Inf(-1), nil
			}
		}
		return x, nil
	case json.Number:
		switch kind {
		case kindUint:
			if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
				return u, nil
			}
		case kindFloat:
			return x.Float64()
		}
		return value.Normalize(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			v, err := decodeValue(e, kind)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("JSON %T is not a tag value", raw)
}
