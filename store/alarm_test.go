package store

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

var alarmT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// journalOf commits n entries one second apart, alternating two sources
// and priorities, and returns them with their sequence numbers.
func journalOf(t *testing.T, db *DB, n int) []AlarmEntry {
	t.Helper()
	var es []AlarmEntry
	for i := range n {
		src, pri, to := "Line1/Tank/Level", "high", "active_unacked"
		if i%2 == 1 {
			src, pri, to = "Line10/Pump/Speed", "low", "normal"
		}
		es = append(es, AlarmEntry{At: alarmT0.Add(time.Duration(i) * time.Second), ID: src + ":A", Source: src,
			Priority: pri, Event: "activate", From: "normal", To: to, Cause: fmt.Sprint("entry ", i),
			Value: float64(i), Quality: value.Good})
	}
	if err := db.CommitAlarms(es, nil, nil); err != nil {
		t.Fatal(err)
	}
	return es
}

func seqsOf(es []AlarmEntry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func TestAlarmJournal_CommitAssignsSeqsAndRoundTrips(t *testing.T) {
	db := openTest(t)
	es := journalOf(t, db, 3)
	if !slices.Equal(seqsOf(es), []uint64{1, 2, 3}) {
		t.Fatalf("seqs %v", seqsOf(es))
	}
	got, next, err := db.QueryAlarmJournal(AlarmQuery{})
	if err != nil || next != 0 || len(got) != 3 {
		t.Fatalf("query: %d entries, next %d, %v", len(got), next, err)
	}
	g := got[1]
	if f, ok := value.ToFloat(g.Value); !ok || f != 1 {
		t.Errorf("value %v (%T)", g.Value, g.Value)
	}
	if g.Seq != 2 || !g.At.Equal(alarmT0.Add(time.Second)) || g.ID != "Line10/Pump/Speed:A" ||
		g.Quality != value.Good || g.Cause != "entry 1" || g.To != "normal" {
		t.Errorf("entry 2 read back as %+v", g)
	}
	info, err := db.AlarmJournalInfo()
	if err != nil || info.Entries != 3 || info.Bytes == 0 || !info.Oldest.Equal(alarmT0) {
		t.Errorf("info %+v %v", info, err)
	}
}

func TestAlarmJournal_Filters(t *testing.T) {
	db := openTest(t)
	journalOf(t, db, 10)
	tests := []struct {
		name string
		q    AlarmQuery
		want []uint64
	}{
		{"path folder, whole segments", AlarmQuery{Path: "Line1"}, []uint64{1, 3, 5, 7, 9}},
		{"path id", AlarmQuery{Path: "Line10/Pump/Speed:A"}, []uint64{2, 4, 6, 8, 10}},
		{"priority", AlarmQuery{Priority: "low"}, []uint64{2, 4, 6, 8, 10}},
		{"state", AlarmQuery{State: "active_unacked"}, []uint64{1, 3, 5, 7, 9}},
		{"time range", AlarmQuery{From: alarmT0.Add(3 * time.Second), To: alarmT0.Add(5 * time.Second)}, []uint64{4, 5, 6}},
		{"from only", AlarmQuery{From: alarmT0.Add(8 * time.Second)}, []uint64{9, 10}},
		{"desc", AlarmQuery{Desc: true, Limit: 3}, []uint64{10, 9, 8}},
		{"desc after", AlarmQuery{Desc: true, After: 8, Limit: 2}, []uint64{7, 6}},
		{"desc to", AlarmQuery{Desc: true, To: alarmT0.Add(2 * time.Second), Limit: 5}, []uint64{3, 2, 1}},
		{"after", AlarmQuery{After: 7}, []uint64{8, 9, 10}},
		{"allow", AlarmQuery{Allow: func(s string) bool { return s == "Line1/Tank/Level" }, Limit: 2}, []uint64{1, 3}},
		{"from after the end", AlarmQuery{From: alarmT0.Add(time.Hour)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := db.QueryAlarmJournal(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seqsOf(got), tt.want) {
				t.Errorf("got %v, want %v", seqsOf(got), tt.want)
			}
		})
	}
}

func TestAlarmJournal_PagesWithNext(t *testing.T) {
	db := openTest(t)
	journalOf(t, db, 7)
	var all []uint64
	after := uint64(0)
	for range 10 {
		page, next, err := db.QueryAlarmJournal(AlarmQuery{After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, seqsOf(page)...)
		if next == 0 {
			break
		}
		after = next
	}
	if !slices.Equal(all, []uint64{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("pages gave %v", all)
	}
}

func TestAlarmJournal_PruneByAgeAndSize(t *testing.T) {
	db := openTest(t)
	journalOf(t, db, 10)
	n, err := db.PruneAlarmJournal(alarmT0.Add(4*time.Second), 0)
	if err != nil || n != 4 {
		t.Fatalf("prune by age removed %d, %v; want 4", n, err)
	}
	got, _, _ := db.QueryAlarmJournal(AlarmQuery{})
	if !slices.Equal(seqsOf(got), []uint64{5, 6, 7, 8, 9, 10}) {
		t.Fatalf("after age prune %v", seqsOf(got))
	}
	// The time index went with the entries: a query from the start finds
	// the first remaining entry.
	if got, _, _ := db.QueryAlarmJournal(AlarmQuery{From: alarmT0}); len(got) != 6 || got[0].Seq != 5 {
		t.Errorf("from the start after prune: %v", seqsOf(got))
	}
	info, _ := db.AlarmJournalInfo()
	per := info.Bytes / info.Entries
	n, err = db.PruneAlarmJournal(time.Time{}, int64(per*2+per/2))
	if err != nil || n != 4 {
		t.Fatalf("prune by size removed %d, %v; want 4 (size %d, ~%d per entry)", n, err, info.Bytes, per)
	}
	info, _ = db.AlarmJournalInfo()
	if info.Entries != 2 || !info.Oldest.Equal(alarmT0.Add(8*time.Second)) {
		t.Errorf("after size prune: %+v", info)
	}
	// Nothing to remove: no change.
	if n, err := db.PruneAlarmJournal(alarmT0, 1<<30); err != nil || n != 0 {
		t.Errorf("idle prune removed %d, %v", n, err)
	}
}

func TestAlarmStates_PutLoadDelete(t *testing.T) {
	db := openTest(t)
	if m, err := db.LoadAlarmStates(); err != nil || len(m) != 0 {
		t.Fatalf("empty store: %v %v", m, err)
	}
	if err := db.CommitAlarms(nil, []AlarmState{{ID: "a:X", Data: []byte(`{"active":true}`)}, {ID: "b:Y", Data: []byte(`{}`)}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CommitAlarms(nil, nil, []string{"b:Y"}); err != nil {
		t.Fatal(err)
	}
	m, err := db.LoadAlarmStates()
	if err != nil || len(m) != 1 || string(m["a:X"]) != `{"active":true}` {
		t.Errorf("states %q %v", m, err)
	}
	if err := db.CommitAlarms([]AlarmEntry{{ID: "a:X"}}, nil, nil); err == nil {
		t.Error("an entry without a time was committed")
	}
}

func TestAlarmJournal_ScanStopsAtLimit(t *testing.T) {
	db := openTest(t)
	journalOf(t, db, 5)
	var seen []uint64
	if err := db.ScanAlarmJournal(alarmT0.Add(time.Second), 3, func(e AlarmEntry) bool {
		seen = append(seen, e.Seq)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []uint64{2, 3, 4}) {
		t.Errorf("scan saw %v", seen)
	}
}

// TestAlarmJournal_AfterTheLastPossibleSeq: after=2^64-1 is an empty page,
// not (through an overflow of after+1) the journal from its start.
func TestAlarmJournal_AfterTheLastPossibleSeq(t *testing.T) {
	db := openTest(t)
	journalOf(t, db, 3)
	page, next, err := db.QueryAlarmJournal(AlarmQuery{After: math.MaxUint64, Limit: 10})
	if err != nil || len(page) != 0 || next != 0 {
		t.Errorf("after the last seq: %v next %d err %v, want an empty page", seqsOf(page), next, err)
	}
}
