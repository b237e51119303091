package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func TestOutbox_AppendReadRemoveInOrder_SurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOutbox(db, OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range 5 {
		if _, err := o.Append(ctx, []OutMsg{{Topic: fmt.Sprintf("t/%d", i), Payload: []byte{byte(i)}, Retain: i == 2, Queued: now}}); err != nil {
			t.Fatal(err)
		}
	}
	es, err := o.Read(0, 10)
	if err != nil || len(es) != 5 {
		t.Fatalf("read %d entries, %v", len(es), err)
	}
	for i, e := range es {
		if e.Topic != fmt.Sprintf("t/%d", i) || e.Payload[0] != byte(i) || e.Retain != (i == 2) || e.Seq != uint64(i+1) {
			t.Errorf("entry %d = %+v", i, e)
		}
	}
	if err := o.Remove(ctx, []uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	o.Close()
	db.Close()

	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o, err = NewOutbox(db, OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	st := o.Stats()
	if st.Depth != 3 || st.LastSeq != 5 || st.Oldest.IsZero() {
		t.Errorf("after reopen: %+v; want depth 3, last seq 5", st)
	}
	es, _ = o.Read(0, 10)
	if len(es) != 3 || es[0].Seq != 3 {
		t.Fatalf("after reopen: %+v", es)
	}
	if _, err := o.Append(ctx, []OutMsg{{Topic: "t/5", Queued: now}}); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.LastSeq != 6 {
		t.Errorf("sequence numbers are never reused: last %d, want 6", st.LastSeq)
	}
}

func TestOutbox_MaxBytesDropsOldestFirstAndCounts(t *testing.T) {
	db := openTest(t)
	// Each entry: 8 (key) + 9 + 1 + 3 (topic "t/x") + 10 (payload) = 31 bytes.
	o, err := NewOutbox(db, OutboxOptions{MaxBytes: 31 * 4})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctx := context.Background()
	total := 0
	for i := range 10 {
		n, err := o.Append(ctx, []OutMsg{{Topic: fmt.Sprintf("t/%d", i), Payload: make([]byte, 10), Queued: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	st := o.Stats()
	if st.Depth != 4 || st.Dropped != 6 || total != 6 || st.Bytes != 31*4 {
		t.Fatalf("stats %+v, dropped by calls %d; want depth 4, 6 dropped", st, total)
	}
	es, _ := o.Read(0, 10)
	if es[0].Topic != "t/6" || es[3].Topic != "t/9" {
		t.Errorf("kept %s..%s; want the newest t/6..t/9", es[0].Topic, es[3].Topic)
	}
	if _, err := o.Append(ctx, []OutMsg{{Topic: "big", Payload: make([]byte, 200)}}); err == nil {
		t.Error("a message larger than the outbox was queued")
	}
}

func TestOutbox_MaxAgeDropsExpired(t *testing.T) {
	db := openTest(t)
	o, err := NewOutbox(db, OutboxOptions{MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctx := context.Background()
	old := time.Now().Add(-2 * time.Hour)
	if _, err := o.Append(ctx, []OutMsg{{Topic: "old", Queued: old}, {Topic: "new", Queued: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	st := o.Stats()
	if st.Depth != 1 || st.Dropped != 1 {
		t.Fatalf("stats %+v; want the two-hour-old message dropped", st)
	}
	es, _ := o.Read(0, 10)
	if len(es) != 1 || es[0].Topic != "new" {
		t.Errorf("kept %+v", es)
	}
}

func TestCommandIDs_RememberedWithinWindowAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if seen, err := db.CommandIDs().Remember("c1", now, time.Minute); seen || err != nil {
		t.Fatalf("first: seen %v, %v", seen, err)
	}
	db.Close()
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if seen, _ := db.CommandIDs().Remember("c1", now.Add(30*time.Second), time.Minute); !seen {
		t.Error("an id seen 30 s ago within a 1 min window was not remembered across reopen")
	}
	if seen, _ := db.CommandIDs().Remember("c1", now.Add(2*time.Minute), time.Minute); seen {
		t.Error("an id seen 2 min ago outside a 1 min window still refused")
	}
}
