package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// TestLastValues_SortedDuplicatePathsDoNotLeaveAStaleEntry: PutLastValues
// sorts a list that is out of order (and a map keeps one VQT per path),
// but a sorted list with a path twice is merged as given: the segment then
// holds the path twice, and every later save or delete of the path changes
// only the first entry, so LoadLastValues (the later entry wins) serves
// the stale one for ever and a deleted tag comes back.
func TestLastValues_SortedDuplicatePathsDoNotLeaveAStaleEntry(t *testing.T) {
	db := openTest(t)
	t0 := time.Unix(1e9, 0).UTC()
	v := func(x float64, s int) value.VQT {
		return value.VQT{Value: x, Quality: value.Good, Time: t0.Add(time.Duration(s) * time.Second)}
	}
	err := db.PutLastValues([]string{"a", "a"}, []value.VQT{v(1, 1), v(2, 2)})
	if err != nil && !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if err := db.PutLastValues([]string{"a"}, []value.VQT{v(3, 3)}); err != nil {
		t.Fatal(err)
	}
	got, err := db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	if !sameVQT(got["a"], v(3, 3)) {
		t.Errorf("after a save of a = 3: a = %v, want 3 (the last save)", got["a"].Value)
	}
	if err := db.DeleteLastValues("a"); err != nil {
		t.Fatal(err)
	}
	got, err = db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	if have, ok := got["a"]; ok {
		t.Errorf("after DeleteLastValues(a): a = %v still stored", have.Value)
	}
}

// TestLastValues_BadValuesAmongGoodOnesAcrossReopen: empty and over-long
// paths and a value of a foreign Go type are refused by name, every good
// one is stored, and all of it is there after a reopen.
func TestLastValues_BadValuesAmongGoodOnesAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1e9, 0).UTC()
	long := strings.Repeat("p", 40000)
	okLong := strings.Repeat("q", 32768)
	vals := map[string]value.VQT{
		"":       {Value: 1.0, Quality: value.Good, Time: t0},
		"good/1": {Value: 1.5, Quality: value.Good, Time: t0},
		long:     {Value: 2.0, Quality: value.Good, Time: t0},
		okLong:   {Value: "x", Quality: value.Good, Time: t0},
		"bad/t":  {Value: struct{}{}, Quality: value.Good, Time: t0},
		"good/2": {Value: []any{int64(1), uint64(1 << 63)}, Quality: value.Good, Time: t0},
		"good/3": {Value: "NaN", Quality: value.Good, Time: t0},
	}
	err = db.SaveLastValues(vals)
	var lve *LastValuesError
	if !errors.As(err, &lve) {
		t.Fatalf("err = %v, want a *LastValuesError", err)
	}
	fp := lve.FailedPaths()
	if len(fp) != 3 || fp[0] != "" || fp[1] != "bad/t" || fp[2] != long {
		t.Errorf("failed = %q…, want the empty path, bad/t and the 40,000-byte path", fp)
	}
	if !strings.Contains(err.Error(), "bad/t") {
		t.Errorf("error %q does not name bad/t", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.LoadLastValues()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"good/1", "good/2", "good/3", okLong} {
		if !sameVQT(got[p], vals[p]) {
			t.Errorf("%.20s = %+v, want %+v", p, got[p], vals[p])
		}
	}
	if len(got) != 4 {
		t.Errorf("%d stored, want 4", len(got))
	}
}
