package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/value"
)

// sameVQT reports whether a stored and loaded VQT is the one saved.
func sameVQT(a, b value.VQT) bool {
	return value.Equal(value.Normalize(a.Value), value.Normalize(b.Value)) && a.Quality == b.Quality &&
		a.Time.Equal(b.Time) && a.Reason == b.Reason && a.StatusCode == b.StatusCode
}

// TestLastValues_SegmentsMatchAModelUnderSavesAndDeletes saves, overwrites
// and deletes random tags in rounds and checks after each that the store
// holds exactly what a map holds: no tag lost or resurrected by the merge
// of a segment's old and new entries.
func TestLastValues_SegmentsMatchAModelUnderSavesAndDeletes(t *testing.T) {
	db := openTest(t)
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]value.VQT{}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	path := func() string { return fmt.Sprintf("plant/line%d/tag%05d", rng.IntN(4), rng.IntN(20000)) }
	for round := 0; round < 12; round++ {
		batch := map[string]value.VQT{}
		for i := 0; i < 3000; i++ {
			var v value.Value
			switch rng.IntN(4) {
			case 0:
				v = rng.Float64()
			case 1:
				v = int64(rng.Int64())
			case 2:
				v = fmt.Sprintf("s%d", rng.IntN(100))
			default:
				v = []any{int64(round), 1.5}
			}
			batch[path()] = value.VQT{Value: v, Quality: value.Good, Time: t0.Add(time.Duration(round) * time.Second)}
		}
		if err := db.SaveLastValues(batch); err != nil {
			t.Fatal(err)
		}
		for p, v := range batch {
			model[p] = v
		}
		var del []string
		for i := 0; i < 500; i++ {
			p := path()
			del = append(del, p)
			delete(model, p)
		}
		if err := db.DeleteLastValues(del...); err != nil {
			t.Fatal(err)
		}
		got, err := db.LoadLastValues()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(model) {
			t.Fatalf("round %d: %d stored, model holds %d", round, len(got), len(model))
		}
		for p, want := range model {
			if !sameVQT(got[p], want) {
				t.Fatalf("round %d: %s = %+v, want %+v", round, p, got[p], want)
			}
		}
	}
}

// TestLastValues_OneSaveIsOnePutPerSegment holds the point of segments:
// saving 20,000 tags writes at most lvSegments records, not 20,000.
func TestLastValues_OneSaveIsOnePutPerSegment(t *testing.T) {
	db := openTest(t)
	vals := map[string]value.VQT{}
	for i := 0; i < 20000; i++ {
		vals[fmt.Sprintf("dev%03d/hr%05d", i/1000, i)] = value.VQT{Value: float64(i), Quality: value.Good, Time: time.Unix(1, 0)}
	}
	if err := db.SaveLastValues(vals); err != nil {
		t.Fatal(err)
	}
	var keys, entries int
	err := db.view(func(tx *bolt.Tx) error {
		keys = tx.Bucket(bucketLastValueSegs).Stats().KeyN
		return readSegments(tx, func(_, _ []byte) error { entries++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys > lvSegments || entries != len(vals) {
		t.Errorf("%d records holding %d tags, want ≤ %d records holding %d", keys, entries, lvSegments, len(vals))
	}
}

// putLegacy writes per-tag records as builds before segments did.
func putLegacy(t *testing.T, db *DB, vals map[string]value.VQT) {
	t.Helper()
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLastValues)
		for p, v := range vals {
			rec, err := encodeVQT(v)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(p), rec); err != nil {
				return err
			}
		}
		return b.Put([]byte("broken"), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLastValues_PerTagRecordsOfAnEarlierBuildMoveIntoSegments: a store
// written by a build before segments (or by one after a firmware
// rollback) keeps its last values through the upgrade; where a segment
// already holds a newer VQT of a tag, the newer one wins; a read-only
// open sees them before the move; the move empties the old bucket and
// drops an unreadable record with a warning instead of failing the open.
func TestLastValues_PerTagRecordsOfAnEarlierBuildMoveIntoSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	old, newer := time.Unix(1000, 0).UTC(), time.Unix(2000, 0).UTC()
	if err := db.SaveLastValues(map[string]value.VQT{
		"a": {Value: "segment, newer", Quality: value.Good, Time: newer},
		"b": {Value: "segment, older", Quality: value.Good, Time: old},
	}); err != nil {
		t.Fatal(err)
	}
	putLegacy(t, db, map[string]value.VQT{
		"a": {Value: "legacy, older", Quality: value.Good, Time: old},
		"b": {Value: "legacy, newer", Quality: value.Good, Time: newer},
		"c": {Value: 3.5, Quality: value.Uncertain, Time: old, Reason: "r", StatusCode: 7},
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "segment, newer", "b": "legacy, newer", "c": "3.5"}
	check := func(db *DB, when string) {
		t.Helper()
		got, err := db.LoadLastValues()
		if err == nil {
			delete(got, "broken")
		}
		if when == "read-only" {
			// The unreadable record is still there and named.
			if err == nil || !strings.Contains(err.Error(), `"broken"`) {
				t.Fatalf("%s: err = %v, want one naming the unreadable tag", when, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d values, want %d: %v", when, len(got), len(want), got)
		}
		for p, w := range want {
			if s := fmt.Sprint(got[p].Value); s != w {
				t.Errorf("%s: %s = %q, want %q", when, p, s, w)
			}
		}
		if c := got["c"]; c.Quality != value.Uncertain || c.Reason != "r" || c.StatusCode != 7 {
			t.Errorf("%s: c = %+v, its quality, reason or status lost", when, c)
		}
	}
	ro, err := Open(path, Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	check(ro, "read-only")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	db, err = Open(path, Options{Timeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, "after the move")
	if !strings.Contains(logs.String(), "tag=broken") {
		t.Errorf("no warning naming the dropped record:\n%s", logs.String())
	}
	var legacyKeys int
	if err := db.view(func(tx *bolt.Tx) error {
		legacyKeys = tx.Bucket(bucketLastValues).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if legacyKeys != 0 {
		t.Errorf("%d per-tag records left after the move", legacyKeys)
	}
}

// TestLastValues_DamagedSegmentIsReplacedNotFatal: one unreadable segment
// record fails the load naming its segment, and the next save of a tag in
// it replaces it, so every later save and load work again.
func TestLastValues_DamagedSegmentIsReplacedNotFatal(t *testing.T) {
	db := openTest(t)
	seg := lvSegment("x")
	if err := db.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketLastValueSegs)
		if err != nil {
			return err
		}
		return b.Put(lvSegKey(seg), []byte{lvSegFormat, 200, 1})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LoadLastValues(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("segment %04x", seg)) {
		t.Fatalf("load err = %v, want one naming segment %04x", err, seg)
	}
	if err := db.SaveLastValues(map[string]value.VQT{"x": {Value: 1.0, Quality: value.Good, Time: time.Unix(5, 0)}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.LoadLastValues()
	if err != nil || got["x"].Value != 1.0 {
		t.Fatalf("after the save: %v, %v", got, err)
	}
}

// TestRecord_BinaryRoundTripAndItsRefusals: every scalar goes as a binary
// record and comes back bit for bit; other values go as JSON; a record
// cut anywhere is refused, never decoded as something else.
func TestRecord_BinaryRoundTripAndItsRefusals(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 0, 0, 987654321, time.UTC)
	for _, v := range []value.Value{math.NaN(), math.Inf(-1), math.Copysign(0, -1), 0.1, int64(math.MinInt64),
		uint64(math.MaxUint64), uint64(0), true, false, "", "Grüße \x00 \"q\"", strings.Repeat("x", 300)} {
		in := value.VQT{Value: v, Quality: value.BadTimeout, Time: ts, Reason: "timed out", StatusCode: math.MaxUint32}
		rec, err := appendRecord(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if rec[0] != recBinary {
			t.Errorf("%#v: record is not binary", v)
		}
		out, err := decodeRecord(rec)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if f, ok := v.(float64); ok {
			if math.Float64bits(f) != math.Float64bits(out.Value.(float64)) {
				t.Errorf("float %v came back as %v", f, out.Value)
			}
		} else if out.Value != v {
			t.Errorf("%#v came back as %#v", v, out.Value)
		}
		if !sameVQT(out, in) && !isNaN(v) {
			t.Errorf("%+v came back as %+v", in, out)
		}
		for cut := 1; cut < len(rec); cut++ {
			if _, err := decodeRecord(rec[:cut]); err == nil {
				t.Fatalf("%#v cut to %d of %d bytes decoded", v, cut, len(rec))
			}
		}
	}
	rec, err := appendRecord(nil, value.VQT{Value: []any{int64(1)}, Quality: value.Good, Time: ts})
	if err != nil || rec[0] != '{' {
		t.Errorf("array record %q, %v: want vqtRecord JSON", rec, err)
	}
}

func isNaN(v value.Value) bool { f, ok := v.(float64); return ok && math.IsNaN(f) }

// FuzzDecodeRecord: no segment record, however damaged, panics the
// decoder, and whatever it accepts encodes back to a record that decodes
// to the same VQT.
func FuzzDecodeRecord(f *testing.F) {
	for _, v := range []value.Value{1.5, int64(-3), uint64(9), true, "s", []any{int64(1), "x"}} {
		rec, _ := appendRecord(nil, value.VQT{Value: v, Quality: value.Good, Time: time.Unix(7, 8), Reason: "r"})
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		vqt, err := decodeRecord(rec)
		if err != nil {
			return
		}
		again, err := appendRecord(nil, vqt)
		if err != nil {
			return // a JSON record the encoder refuses (a mixed non-finite array)
		}
		back, err := decodeRecord(again)
		if err != nil {
			t.Fatalf("re-encoded record %q refused: %v", again, err)
		}
		if !sameVQT(back, vqt) && !isNaN(vqt.Value) {
			t.Fatalf("%+v came back as %+v", vqt, back)
		}
	})
}
