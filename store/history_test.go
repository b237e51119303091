package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/value"
)

var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is a settable clock for History.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func openHistTest(t *testing.T, db *DB, opts HistoryOptions) *History {
	t.Helper()
	if opts.CommitEvery == 0 {
		opts.CommitEvery = 10 * time.Millisecond
	}
	h, err := OpenHistory(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("history close: %v", err)
		}
	})
	return h
}

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func record(t *testing.T, h *History, path string, ss ...Sample) {
	t.Helper()
	for _, s := range ss {
		if !h.Record(path, s) {
			t.Fatalf("Record(%s) refused", path)
		}
	}
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func good(sec float64, v value.Value) Sample {
	return Sample{Time: at(sec), Value: v, Quality: value.Good}
}

func query(t *testing.T, h *History, q TrendQuery) []Trend {
	t.Helper()
	tr, err := h.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func pointsString(ps []TrendPoint) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%g=%v/%s ", p.Time.Sub(t0).Seconds(), p.Value, p.Quality)
	}
	return strings.TrimSpace(b.String())
}

func TestHistory_Query_RawFromJournalBlocksAndReplay(t *testing.T) {
	db := openTest(t)
	h := openHistTest(t, db, HistoryOptions{})
	record(t, h, "L1/T", good(1, 1.5), good(2, int64(2)), Sample{Time: at(3), Value: "s", Quality: value.BadNotConnected},
		good(4, true), good(5, []any{int64(1), "x"}), good(6, uint64(math.MaxUint64)), good(7, nil))
	want := "1=1.5/Good 2=2/Good 3=s/Bad_NotConnected 4=true/Good 5=[1 x]/Good 6=18446744073709551615/Good 7=<nil>/Good"
	q := TrendQuery{Paths: []string{"L1/T", "never"}, Start: at(0), End: at(10)}
	tr := query(t, h, q)
	if got := pointsString(tr[0].Points); got != want {
		t.Fatalf("from journal: %s\nwant %s", got, want)
	}
	if tr[0].Bad != 1 || !tr[0].Known || tr[1].Known || len(tr[1].Points) != 0 {
		t.Fatalf("bad=%d known=%v, unknown path %+v", tr[0].Bad, tr[0].Known, tr[1])
	}
	// A second History over the same file replays the journal (what a
	// restart after kill -9 does).
	h2, err := OpenHistory(db, HistoryOptions{CommitEvery: time.Hour, noCloseCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := pointsString(query(t, h2, q)[0].Points); got != want {
		t.Fatalf("after replay: %s\nwant %s", got, want)
	}
	close(h2.stop) // stop its writer without a checkpoint
	<-h2.done
	if err := h.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := pointsString(query(t, h, q)[0].Points); got != want {
		t.Fatalf("from blocks: %s\nwant %s", got, want)
	}
	if st := h.Stats(); st.Journal != 0 || st.Bytes == 0 || st.Committed != 7 {
		t.Fatalf("stats after checkpoint: %+v", st)
	}
	// Range bounds are inclusive and cut inside a block.
	tr = query(t, h, TrendQuery{Paths: []string{"L1/T"}, Start: at(2), End: at(4)})
	if got := pointsString(tr[0].Points); got != "2=2/Good 3=s/Bad_NotConnected 4=true/Good" {
		t.Fatalf("range [2,4]: %s", got)
	}
}

// TestHistory_Keys_BigEndianTimeOrder: timestamps 9, 10, 11 come back in
// numeric order (not "10", "11", "9" as decimal-string keys would), also
// across blocks.
func TestHistory_Keys_BigEndianTimeOrder(t *testing.T) {
	db := openTest(t)
	h := openHistTest(t, db, HistoryOptions{})
	for _, ns := range []int64{9, 10, 11} {
		record(t, h, "T", Sample{Time: time.Unix(0, ns), Value: ns, Quality: value.Good})
		if err := h.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	tr := query(t, h, TrendQuery{Paths: []string{"T"}, Start: time.Unix(0, 1), End: time.Unix(0, 100)})
	var got []string
	for _, p := range tr[0].Points {
		got = append(got, fmt.Sprint(p.Value))
	}
	if strings.Join(got, ",") != "9,10,11" {
		t.Fatalf("order %v; want 9,10,11", got)
	}
	// Times before 1970 order too.
	if !(string(timeKey(-5)) < string(timeKey(3))) || keyTime(timeKey(-5)) != -5 {
		t.Fatal("timeKey does not order negative times")
	}
}

func TestHistory_Checkpoint_LateSamplesMerged(t *testing.T) {
	db := openTest(t)
	h := openHistTest(t, db, HistoryOptions{})
	ctx := context.Background()
	var ss []Sample
	for i := 10; i < 1500; i += 2 { // spans several blocks
		ss = append(ss, good(float64(i), int64(i)))
	}
	record(t, h, "T", ss...)
	if err := h.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// Late samples: before everything, inside blocks, at the end; and an
	// out-of-order arrival in the journal.
	record(t, h, "T", good(1, int64(1)), good(501, int64(501)), good(1499, int64(1499)), good(1600, int64(1600)), good(1550, int64(1550)))
	tr := query(t, h, TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(2000)})
	check := func(stage string, ps []TrendPoint) {
		t.Helper()
		if len(ps) != len(ss)+5 {
			t.Fatalf("%s: %d points; want %d", stage, len(ps), len(ss)+5)
		}
		for i := 1; i < len(ps); i++ {
			if ps[i].Time.Before(ps[i-1].Time) {
				t.Fatalf("%s: point %d at %s before %s", stage, i, ps[i].Time, ps[i-1].Time)
			}
		}
	}
	check("before checkpoint", tr[0].Points)
	if err := h.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	check("after checkpoint", query(t, h, TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(2000)})[0].Points)
	// Blocks never overlap.
	err := db.view(func(tx *bolt.Tx) error {
		data, _ := histDataBucket(tx)
		tb := data.Bucket(u32Key(h.ids["T"]))
		last := int64(math.MinInt64)
		return tb.ForEach(func(k, v []byte) error {
			hdr, err := readBlockHeader(v)
			if err != nil {
				return err
			}
			if hdr.first <= last || keyTime(k) != hdr.first {
				return fmt.Errorf("block %d..%d overlaps the previous (ending %d) or is misfiled", hdr.first, hdr.last, last)
			}
			last = hdr.last
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A range starting inside a merged block.
	got := pointsString(query(t, h, TrendQuery{Paths: []string{"T"}, Start: at(500), End: at(502)})[0].Points)
	if got != "500=500/Good 501=501/Good 502=502/Good" {
		t.Fatalf("[500,502]: %s", got)
	}
}

func TestHistory_Query_Aggregates(t *testing.T) {
	db := openTest(t)
	clk := &fakeClock{t: at(1000)}
	h := openHistTest(t, db, HistoryOptions{now: clk.now})
	// Interval 10 s from 0. Samples:
	//  -5: 100 (before the range: holds into [0,10))
	//   2: 10, 4: Bad, 6: 20 (Uncertain), 8: 30
	//  12: 40; 25: "text"
	record(t, h, "T",
		good(-5, 100.0), good(2, 10.0), Sample{Time: at(4), Value: nil, Quality: value.BadCommunicationError},
		Sample{Time: at(6), Value: 20.0, Quality: value.Uncertain}, good(8, int64(30)), good(12, 40.0), good(25, "text"))
	tests := []struct {
		agg  Aggregate
		want string
		bad  int
	}{
		// avg [0,10): 100×2 + 10×2 + (bad 2 s excluded) + 20×2 + 30×2 over 8 s = 40;
		// [10,20): 30×2 + 40×8 over 10 = 38; [20,30): 40×5 then text (no number)
		// until 30 → 40.
		{AggAvg, "0=40/Uncertain 10=38/Good 20=40/Good", 1},
		{AggMin, "0=10/Uncertain 10=40/Good", 1},
		{AggMax, "0=30/Uncertain 10=40/Good", 1},
		{AggFirst, "0=10/Uncertain 10=40/Good 20=text/Good", 1},
		{AggLast, "0=30/Uncertain 10=40/Good 20=text/Good", 1},
		{AggCount, "0=3/Uncertain 10=1/Good 20=1/Good", 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.agg), func(t *testing.T) {
			tr := query(t, h, TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(29), Interval: 10 * time.Second, Aggregate: tt.agg})
			if got := pointsString(tr[0].Points); got != tt.want || tr[0].Bad != tt.bad {
				t.Fatalf("%s = %s (bad %d)\nwant %s (bad %d)", tt.agg, got, tr[0].Bad, tt.want, tt.bad)
			}
		})
	}
	// The last value holds until now, not beyond.
	clk.set(at(15))
	tr := query(t, h, TrendQuery{Paths: []string{"T"}, Start: at(10), End: at(29), Interval: 10 * time.Second, Aggregate: AggAvg})
	if got := pointsString(tr[0].Points); got != "10=36/Good" {
		t.Fatalf("avg up to now: %s; want 10=36/Good", got)
	}
}

func TestHistory_Query_Invalid(t *testing.T) {
	h := openHistTest(t, openTest(t), HistoryOptions{})
	tests := []struct {
		name string
		q    TrendQuery
	}{
		{"end before start", TrendQuery{Paths: []string{"T"}, Start: at(10), End: at(0)}},
		{"no start", TrendQuery{Paths: []string{"T"}, End: at(0)}},
		{"aggregate without interval", TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(1), Aggregate: AggAvg}},
		{"unknown aggregate", TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(1), Aggregate: "median"}},
		{"too many intervals", TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(1e6), Interval: time.Second, Aggregate: AggMin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.Query(context.Background(), tt.q); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Query = %v; want ErrInvalid", err)
			}
		})
	}
}

// TestHistory_StatusCodesRoundTrip: a status change alone is kept as data,
// through the journal, the replay after a restart and the blocks.
func TestHistory_StatusCodesRoundTrip(t *testing.T) {
	db := openTest(t)
	h, err := OpenHistory(db, HistoryOptions{CommitEvery: time.Hour, noCloseCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	h.Offer("T", value.VQT{Value: 1.0, Quality: value.Good, Time: at(1)})
	h.Offer("T", value.VQT{Value: 1.0, Quality: value.Good, StatusCode: 0x00300000, Time: at(2)})
	h.Offer("T", value.VQT{Value: 1.0, Quality: value.Uncertain, StatusCode: 0x40940000, Time: at(3)})
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "[{1 0} {2 3145728} {3 1083441152}]"
	codes := func(h *History) string {
		tr := query(t, h, TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(10)})
		var out []string
		for _, p := range tr[0].Points {
			out = append(out, fmt.Sprintf("{%g %d}", p.Time.Sub(t0).Seconds(), p.StatusCode))
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	h2 := openHistTest(t, db, HistoryOptions{}) // replays the journal
	if got := codes(h2); got != want {
		t.Fatalf("from the journal: %s, want %s", got, want)
	}
	if err := h2.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := codes(h2); got != want {
		t.Fatalf("from the blocks: %s, want %s", got, want)
	}
}

func TestHistory_Record_OverflowCountedAndAlarmed(t *testing.T) {
	db := openTest(t)
	h := openHistTest(t, db, HistoryOptions{Queue: 10, CommitEvery: time.Hour})
	took := 0
	for i := range 25 {
		if h.Record("T", good(float64(i), int64(i))) {
			took++
		}
	}
	st := h.Stats()
	if took != 10 || st.Dropped != 15 {
		t.Fatalf("took %d, dropped %d; want 10 and 15", took, st.Dropped)
	}
	al := h.Alarms()
	if len(al) != 1 || !strings.Contains(al[0], "15 samples dropped") {
		t.Fatalf("alarms %q; want the overflow", al)
	}
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !h.Record("T", good(100, int64(1))) {
		t.Fatal("queue still full after the commit")
	}
}

func TestHistory_Retention_AgeSizeAndFailureAlarm(t *testing.T) {
	db := openTest(t)
	clk := &fakeClock{t: at(0)}
	fail := errors.New("disk on fire")
	var failing sync.Mutex
	shouldFail := false
	h := openHistTest(t, db, HistoryOptions{now: clk.now, CommitEvery: time.Hour, RetentionEvery: time.Hour,
		MaxAge: 100 * time.Second,
		retentionHook: func() error {
			failing.Lock()
			defer failing.Unlock()
			if shouldFail {
				return fail
			}
			return nil
		}})
	ctx := context.Background()
	for blk := range 5 { // five blocks per tag, 100 s apart
		for _, p := range []string{"A", "B"} {
			record(t, h, p, good(float64(blk*100), int64(blk)), good(float64(blk*100+50), int64(blk)))
		}
		if err := h.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.set(at(460)) // cutoff 360: blocks ending at 50, 150, 250, 350 go
	if err := h.RunRetention(ctx); err != nil {
		t.Fatal(err)
	}
	tr := query(t, h, TrendQuery{Paths: []string{"A", "B"}, Start: at(-1), End: at(1000)})
	if got := pointsString(tr[0].Points); got != "400=4/Good 450=4/Good" {
		t.Fatalf("A after age retention: %s", got)
	}
	st := h.Stats()
	if st.RetentionDeleted != 8 {
		t.Fatalf("deleted %d blocks; want 8", st.RetentionDeleted)
	}
	// By size: keep at most one block's worth.
	h.opts.MaxAge = 0
	h.opts.MaxBytes = st.Bytes/2 + 1
	if err := h.RunRetention(ctx); err != nil {
		t.Fatal(err)
	}
	tr = query(t, h, TrendQuery{Paths: []string{"A", "B"}, Start: at(-1), End: at(1000)})
	if n := len(tr[0].Points) + len(tr[1].Points); n != 2 || h.Stats().Bytes > h.opts.MaxBytes {
		t.Fatalf("after size retention %d points, %d bytes (max %d)", n, h.Stats().Bytes, h.opts.MaxBytes)
	}
	// A failing retention job raises an alarm (docs/config.md, "history"),
	// cleared by the next good run.
	failing.Lock()
	shouldFail = true
	failing.Unlock()
	if err := h.RunRetention(ctx); !errors.Is(err, fail) {
		t.Fatalf("RunRetention = %v; want the failure", err)
	}
	if al := h.Alarms(); len(al) != 1 || !strings.Contains(al[0], "retention failing") || !strings.Contains(al[0], "disk on fire") {
		t.Fatalf("alarms %q", al)
	}
	failing.Lock()
	shouldFail = false
	failing.Unlock()
	if err := h.RunRetention(ctx); err != nil {
		t.Fatal(err)
	}
	if al := h.Alarms(); len(al) != 0 {
		t.Fatalf("alarms after a good run %q", al)
	}
}

func TestHistory_Close_CheckpointsJournal(t *testing.T) {
	db := openTest(t)
	h, err := OpenHistory(db, HistoryOptions{CommitEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.Record("T", good(1, 1.0))
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h2 := openHistTest(t, db, HistoryOptions{})
	if st := h2.Stats(); st.Journal != 0 || st.Bytes == 0 {
		t.Fatalf("after Close: journal %d, bytes %d; want 0 and > 0", st.Journal, st.Bytes)
	}
	if got := pointsString(query(t, h2, TrendQuery{Paths: []string{"T"}, Start: at(0), End: at(2)})[0].Points); got != "1=1/Good" {
		t.Fatalf("after reopen: %s", got)
	}
	if h.Record("T", good(2, 1.0)) {
		t.Fatal("Record after Close accepted")
	}
}

func TestHistBlock_RoundTrip(t *testing.T) {
	in := []sample{
		{t: -1, q: value.Good, v: nil}, {t: 0, q: value.Good, v: true}, {t: 5, q: value.Uncertain, v: false},
		{t: 5, q: value.BadTimeout, v: int64(math.MinInt64)}, {t: 1 << 60, q: value.Good, v: uint64(math.MaxUint64)},
		{t: 1<<60 + 1, q: value.Good, v: math.Inf(-1)}, {t: 1<<60 + 2, q: value.Good, v: "héllo"},
		{t: 1<<60 + 3, q: value.Good, v: []any{int64(1), 2.5, "x", []any{true}}},
	}
	blocks, err := encodeSorted(in)
	if err != nil || len(blocks) != 1 {
		t.Fatal(blocks, err)
	}
	out, err := appendBlockSamples(nil, blocks[0].encode())
	if err != nil || len(out) != len(in) {
		t.Fatal(out, err)
	}
	for i := range in {
		if out[i].t != in[i].t || out[i].q != in[i].q || !value.Equal(out[i].v, in[i].v) {
			t.Fatalf("sample %d = %+v; want %+v", i, out[i], in[i])
		}
	}
	if _, err := appendHistValue(nil, struct{}{}); err == nil {
		t.Fatal("a struct value was accepted")
	}
	if _, err := appendBlockSamples(nil, []byte{blockVersion, 1, 2}); !errors.Is(err, errBlockCorrupt) {
		t.Fatalf("short block: %v", err)
	}
}

// One sample that cannot be stored (a path bbolt cannot key) never stops
// the others of its group commit.
func TestHistory_Commit_BadSampleNeverStopsTheOthers(t *testing.T) {
	db := openTest(t)
	h := openHistTest(t, db, HistoryOptions{CommitEvery: time.Hour})
	huge := strings.Repeat("Bad/one/", 5000) // 40 KB
	record(t, h, "Good/one", good(1, 1.0))
	h.Record(huge, good(2, 2.0))
	record(t, h, "Good/two", good(3, 3.0))
	tr := query(t, h, TrendQuery{Paths: []string{"Good/one", "Good/two"}, Start: at(0), End: at(10)})
	if len(tr[0].Points) != 1 || len(tr[1].Points) != 1 {
		t.Fatalf("good samples lost: %+v", tr)
	}
	if st := h.Stats(); st.Rejected != 1 || st.Committed != 2 || st.CommitFailures != 0 {
		t.Fatalf("stats %+v; want 1 rejected, 2 committed, no failed commit", st)
	}
}
