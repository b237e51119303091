package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustRecords(t *testing.T, db *DB) []AuditRecord {
	t.Helper()
	var all []AuditRecord
	var after uint64
	for {
		recs, err := db.AuditRecords(after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return all
		}
		all = append(all, recs...)
		after = recs[len(recs)-1].Seq
	}
}

// N goroutines × M records, then Flush: exactly N×M records, Seq 1..N×M in
// key order, none lost or duplicated, and each goroutine's records in the
// order it enqueued them.
func TestAuditLog_Enqueue_ConcurrentGroupCommit(t *testing.T) {
	const n, m = 16, 200
	db := openTest(t)
	var commits atomic.Int64
	log := NewAuditLog(db, AuditOptions{Queue: n * m, MaxDelay: 5 * time.Millisecond, MaxBatch: 64,
		commitHook: func(int) error { commits.Add(1); return nil }}, nil)
	defer log.Close(context.Background())

	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range m {
				rec := AuditRecord{Principal: fmt.Sprintf("g%d", g), Action: "tag.write",
					Target: fmt.Sprintf("g%d/%d", g, i), After: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
				if err := log.Enqueue(rec); err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	recs := mustRecords(t, db)
	if len(recs) != n*m {
		t.Fatalf("%d records, want %d", len(recs), n*m)
	}
	seen := map[string]bool{}
	next := map[string]int{}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has Seq %d", i, r.Seq)
		}
		if seen[r.Target] {
			t.Fatalf("duplicate %s", r.Target)
		}
		seen[r.Target] = true
		var after struct{ I int }
		if err := json.Unmarshal(r.After, &after); err != nil {
			t.Fatal(err)
		}
		if after.I != next[r.Principal] {
			t.Fatalf("%s: record %d committed before %d", r.Principal, after.I, next[r.Principal])
		}
		next[r.Principal]++
		if r.Time.IsZero() || r.Time.Location() != time.UTC {
			t.Fatalf("record time %v, want set, UTC", r.Time)
		}
	}
	if c := commits.Load(); c >= n*m {
		t.Errorf("%d commits for %d records: not grouped", c, n*m)
	}
	if s := log.Stats(); s.Enqueued != n*m || s.Committed != n*m || s.Refused != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// While a commit is stuck (slow disk), the queue fills and Enqueue returns
// ErrAuditFull at once; what was queued is committed once the disk is back,
// and the refused record is not.
func TestAuditLog_Enqueue_FullWhenCommitSlow(t *testing.T) {
	db := openTest(t)
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	log := NewAuditLog(db, AuditOptions{Queue: 2, MaxBatch: 1, MaxDelay: time.Millisecond,
		commitHook: func(int) error {
			entered <- struct{}{}
			<-release
			return nil
		}}, nil)
	defer log.Close(context.Background())

	if err := log.Enqueue(AuditRecord{Action: "a", Target: "1"}); err != nil {
		t.Fatal(err)
	}
	<-entered // the writer holds record 1 in a stuck commit
	for _, target := range []string{"2", "3"} {
		if err := log.Enqueue(AuditRecord{Action: "a", Target: target}); err != nil {
			t.Fatalf("Enqueue %s: %v", target, err)
		}
	}
	start := time.Now()
	err := log.Enqueue(AuditRecord{Action: "a", Target: "refused"})
	if !errors.Is(err, ErrAuditFull) {
		t.Fatalf("Enqueue on a full queue = %v, want ErrAuditFull", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Enqueue blocked %s", d)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := mustRecords(t, db)
	if len(recs) != 3 || recs[0].Target != "1" || recs[1].Target != "2" || recs[2].Target != "3" {
		t.Errorf("records = %+v; want 1, 2, 3", recs)
	}
	if s := log.Stats(); s.Refused != 1 {
		t.Errorf("Stats.Refused = %d, want 1", s.Refused)
	}
}

// Flush does not wait MaxDelay: it asks for the batch now.
func TestAuditLog_Flush_DoesNotWaitMaxDelay(t *testing.T) {
	db := openTest(t)
	log := NewAuditLog(db, AuditOptions{MaxDelay: time.Hour}, nil)
	defer log.Close(context.Background())
	if err := log.Enqueue(AuditRecord{Action: "a"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := log.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v (waited for MaxDelay?)", err)
	}
	if recs := mustRecords(t, db); len(recs) != 1 {
		t.Errorf("%d records", len(recs))
	}
	// Nothing enqueued: Flush returns at once.
	if err := log.Flush(ctx); err != nil {
		t.Error(err)
	}
}

// A failed commit is retried, in order, and Flush reports the failure.
func TestAuditLog_Commit_FailureRetried(t *testing.T) {
	db := openTest(t)
	var fails atomic.Int32
	fails.Store(2)
	injected := errors.New("injected disk error")
	log := NewAuditLog(db, AuditOptions{MaxDelay: time.Millisecond, commitHook: func(int) error {
		if fails.Add(-1) >= 0 {
			return injected
		}
		return nil
	}}, nil)
	defer log.Close(context.Background())
	for i := range 3 {
		if err := log.Enqueue(AuditRecord{Action: "a", Target: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := log.Flush(ctx); !errors.Is(err, injected) {
		t.Errorf("Flush during failing commits = %v, want the commit error", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for log.Stats().Committed < 3 && time.Now().Before(deadline) {
		if err := log.Flush(ctx); err != nil && !errors.Is(err, injected) {
			t.Fatal(err)
		}
	}
	recs := mustRecords(t, db)
	if len(recs) != 3 || recs[0].Target != "0" || recs[2].Target != "2" {
		t.Errorf("records after retries = %+v", recs)
	}
	if s := log.Stats(); s.CommitFailures != 2 || !errors.Is(s.LastError, injected) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestAuditLog_Close(t *testing.T) {
	t.Run("drains, then refuses", func(t *testing.T) {
		db := openTest(t)
		log := NewAuditLog(db, AuditOptions{MaxDelay: time.Hour, MaxBatch: 7}, nil)
		for i := range 100 {
			if err := log.Enqueue(AuditRecord{Action: "a", Target: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := log.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if recs := mustRecords(t, db); len(recs) != 100 {
			t.Errorf("%d records after Close, want 100", len(recs))
		}
		if err := log.Enqueue(AuditRecord{Action: "late"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
		}
		if err := log.Flush(ctx); err != nil {
			t.Errorf("Flush after a clean Close = %v", err)
		}
		if err := log.Close(ctx); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})
	t.Run("deadline with a dead disk reports the loss", func(t *testing.T) {
		db := openTest(t)
		log := NewAuditLog(db, AuditOptions{MaxDelay: time.Millisecond,
			commitHook: func(int) error { return errors.New("disk gone") }}, nil)
		for range 5 {
			if err := log.Enqueue(AuditRecord{Action: "a"}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := log.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "5 records not committed") {
			t.Errorf("Close = %v; want deadline error saying 5 records not committed", err)
		}
	})
}

func TestAuditLog_Enqueue_InvalidJSON(t *testing.T) {
	db := openTest(t)
	log := NewAuditLog(db, AuditOptions{}, nil)
	defer log.Close(context.Background())
	if err := log.Enqueue(AuditRecord{Action: "a", Before: json.RawMessage(`{bad`)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Enqueue with invalid Before = %v, want ErrInvalid", err)
	}
	if s := log.Stats(); s.Enqueued != 0 {
		t.Errorf("invalid record was queued: %+v", s)
	}
}

func TestDB_AuditRecords_Paging(t *testing.T) {
	db := openTest(t)
	log := NewAuditLog(db, AuditOptions{}, nil)
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := range 25 {
		rec := AuditRecord{Time: ts.Add(time.Duration(i) * time.Second), Principal: "op", Realm: "operator",
			Origin: "liveview:p1", Script: "pumps.start", Action: "tag.write", Target: "Line1/Pump/Speed",
			Before: json.RawMessage(`{"v":1.0,"q":"Good"}`), After: json.RawMessage(`{"v":2.0}`),
			Result: "Good", Detail: fmt.Sprint(i)}
		if err := log.Enqueue(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	page, err := db.AuditRecords(10, 5)
	if err != nil || len(page) != 5 || page[0].Seq != 11 || page[4].Seq != 15 {
		t.Fatalf("AuditRecords(10, 5) = %+v, %v; want 11..15", page, err)
	}
	r := page[0]
	if r.Detail != "10" || !r.Time.Equal(ts.Add(10*time.Second)) || r.Principal != "op" || r.Realm != "operator" ||
		r.Origin != "liveview:p1" || r.Script != "pumps.start" || r.Action != "tag.write" ||
		r.Target != "Line1/Pump/Speed" || string(r.Before) != `{"v":1.0,"q":"Good"}` || string(r.After) != `{"v":2.0}` || r.Result != "Good" {
		t.Errorf("record 11 = %+v", r)
	}
	if page, _ := db.AuditRecords(25, 5); len(page) != 0 {
		t.Errorf("past the end: %+v", page)
	}
	if page, _ := db.AuditRecords(^uint64(0), 5); len(page) != 0 {
		t.Errorf("after max: %+v", page)
	}
}
