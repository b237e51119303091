package alarm

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

func TestRestart_ActiveUnackedStaysUntilAFreshValue(t *testing.T) {
	dir := t.TempDir()
	def := "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, deadband: 2}\n"
	db := openStore(t, dir)
	h := newHarness(t, def, withStore(db))
	h.set("Line1/Tank/Level", 95.0)
	h.wantState(hiID, ActiveUnacked)
	if err := h.e.AddNote(operator, hiID, "called maintenance"); err != nil {
		t.Fatal(err)
	}
	// The process dies here: no Stop, the store is closed as the kernel
	// would release it.
	db.Close()

	db = openStore(t, dir)
	defer db.Close()
	h2 := newHarness(t, def, withStore(db))
	h2.now = t0.Add(time.Minute)
	a := h2.wantState(hiID, ActiveUnacked)
	if !a.ActiveSince.Equal(t0) || len(a.Notes) != 1 || a.Notes[0].Text != "called maintenance" || a.Evaluable {
		t.Fatalf("restored %+v", a)
	}
	// The tag engine seeds the last value as Uncertain_LastUsableValue: not
	// a verdict.
	h2.setQ("Line1/Tank/Level", 80.0, value.UncertainLastUsableValue)
	h2.wantState(hiID, ActiveUnacked)
	// The first fresh value still above: still the same activation.
	h2.set("Line1/Tank/Level", 96.0)
	if a := h2.wantState(hiID, ActiveUnacked); !a.ActiveSince.Equal(t0) || !a.Evaluable {
		t.Fatalf("re-evaluated %+v", a)
	}
	h2.wantEvents(hiID) // nothing new happened
	h2.set("Line1/Tank/Level", 50.0)
	h2.wantState(hiID, RTNUnacked)

	// The journal holds every transition, in order.
	es, _, err := db.QueryAlarmJournal(store.AlarmQuery{Path: hiID})
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, e := range es {
		evs = append(evs, e.Event+" "+e.To)
	}
	if got := strings.Join(evs, ", "); got != "activate active_unacked, note active_unacked, clear rtn_unacked" {
		t.Errorf("journal: %s", got)
	}
	if es[0].Priority != "medium" || es[0].Source != "Line1/Tank/Level" || es[1].By != "ann" || es[1].Note != "called maintenance" {
		t.Errorf("entries %+v", es[:2])
	}
}

func TestRestart_StatsAndShelveFromTheJournal(t *testing.T) {
	dir := t.TempDir()
	def := "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, chattering: {count: 3, window: 60s}}\n"
	db := openStore(t, dir)
	h := newHarness(t, def, withStore(db))
	for i := range 3 {
		h.now = t0.Add(time.Duration(i) * time.Second)
		h.set("Line1/Tank/Level", 95.0)
		h.set("Line1/Tank/Level", 50.0)
	}
	h.e.Shelve(supervisor, []string{hiID}, 10*time.Minute, false)
	db.Close()

	db = openStore(t, dir)
	defer db.Close()
	h2 := newHarness(t, def, withStore(db), func(o *Options) {})
	h2.now = t0.Add(5 * time.Second)
	st := h2.e.Stats(time.Hour, nil)
	if st.Activations != 3 || len(st.Top) != 1 || st.Top[0].Count != 3 || len(st.Chattering) != 1 {
		t.Errorf("stats after restart: %+v", st)
	}
	if a := h2.alarm(hiID); a.Shelf == nil || a.Shelf.By != "sue" {
		t.Errorf("shelf after restart %+v", a.Shelf)
	}
	// A shelve that expired while stopped ends at start.
	db.Close()
	db = openStore(t, dir)
	defer db.Close()
	var h3 *harness
	h3 = newHarness(t, def, withStore(db), func(o *Options) {
		o.Now = func() time.Time { return t0.Add(time.Hour) }
	})
	if a := h3.alarm(hiID); a.Shelf != nil {
		t.Errorf("expired shelve kept: %+v", a.Shelf)
	}
}

func TestSetDefinitions_RemovedAlarmLeavesTheJournal(t *testing.T) {
	db := openStore(t, t.TempDir())
	defer db.Close()
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n- {name: Low, tag: Line1/Tank/Level, mode: below, setpoint: 10}\n", withStore(db))
	h.set("Line1/Tank/Level", 95.0)
	insts, _ := parseDefs(t, "- {name: Low, tag: Line1/Tank/Level, mode: below, setpoint: 10}\n")
	h.e.SetDefinitions(insts)
	if _, ok := h.e.Get(hiID); ok {
		t.Fatal("removed alarm still listed")
	}
	h.wantEvents(hiID, "activate normal→active_unacked", "removed active_unacked→normal")
	states, _ := db.LoadAlarmStates()
	if _, ok := states[hiID]; ok {
		t.Error("removed alarm's state kept")
	}
}

// fakeSource is a tag engine whose subscription the test fills, and whose
// overflow count it raises.
type fakeSource struct {
	ch      chan Change
	dropped atomic.Uint64
	mu      sync.Mutex
	cur     map[string]value.VQT
}

func (f *fakeSource) Subscribe(buf int) (<-chan Change, func() uint64, func()) {
	return f.ch, f.dropped.Load, func() {}
}

func (f *fakeSource) Read(paths []string) []value.VQT {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]value.VQT, len(paths))
	for i, p := range paths {
		if v, ok := f.cur[p]; ok {
			out[i] = v
		} else {
			out[i] = value.Bad(value.BadNodeIDUnknown, "unknown", time.Now())
		}
	}
	return out
}

func (f *fakeSource) setCurrent(p string, v value.VQT) {
	f.mu.Lock()
	f.cur[p] = v
	f.mu.Unlock()
}

// waitFor polls cond until it holds (the loop runs on its own goroutine);
// it fails after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFeedOverflow_ResyncFromCurrentValues(t *testing.T) {
	src := &fakeSource{ch: make(chan Change, 16), cur: map[string]value.VQT{}}
	src.setCurrent("Line1/Tank/Level", value.VQT{Value: 50.0, Quality: value.Good, Time: time.Now()})
	insts, _ := parseDefs(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	e, err := New(Options{Source: src}, insts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	if a, _ := e.Get(hiID); a.State != Normal || !a.Evaluable {
		t.Fatalf("after start %+v", a)
	}
	// The change to 95 was lost in the tag engine's fan-out: only the
	// count says so.
	src.setCurrent("Line1/Tank/Level", value.VQT{Value: 95.0, Quality: value.Good, Time: time.Now()})
	src.dropped.Add(1)
	src.ch <- Change{Path: "Other/Tag", VQT: value.VQT{Value: 1.0, Quality: value.Good, Time: time.Now()}}
	waitFor(t, "the resync", func() bool { a, _ := e.Get(hiID); return a.State == ActiveUnacked })
	m := e.Metrics()
	if m.ResyncsTotal != 1 || m.FeedDroppedTotal != 1 {
		t.Errorf("metrics %+v", m)
	}
	if h := e.Health(); len(h) != 1 || !strings.Contains(h[0], "alarm feed overflowed 1 times (1 tag changes lost") {
		t.Errorf("health %q", h)
	}
	// A change queued before the value the resync read is stale: skipped.
	src.ch <- Change{Path: "Line1/Tank/Level", VQT: value.VQT{Value: 10.0, Quality: value.Good, Time: time.Now().Add(-time.Minute)}}
	src.ch <- Change{Path: "Line1/Tank/Level", VQT: value.VQT{Value: 96.0, Quality: value.Good, Time: time.Now()}}
	waitFor(t, "the fresh change", func() bool { a, _ := e.Get(hiID); return a.Value == 96.0 })
	if a, _ := e.Get(hiID); a.State != ActiveUnacked {
		t.Errorf("a stale change was applied: %s", a.State)
	}
}

func TestLoop_DelayFiresOnTime(t *testing.T) {
	src := &fakeSource{ch: make(chan Change, 16), cur: map[string]value.VQT{}}
	insts, _ := parseDefs(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, active_delay: 200ms}\n")
	e, _ := New(Options{Source: src}, insts)
	ch, _, _ := e.Subscribe(10)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	sent := time.Now()
	src.ch <- Change{Path: "Line1/Tank/Level", VQT: value.VQT{Value: 95.0, Quality: value.Good, Time: sent}}
	select {
	case tr := <-ch:
		if tr.Event != EventActivate || tr.At.Sub(sent) < 200*time.Millisecond {
			t.Errorf("transition %s at +%s", tr.Event, tr.At.Sub(sent))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no activation")
	}
}

func TestJournalCommitFailure_RefusesOperationsAndRetries(t *testing.T) {
	j := &failingJournal{}
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n", func(o *Options) { o.Journal = j })
	ch, _, cancel := h.e.Subscribe(10)
	defer cancel()
	j.fail.Store(true)
	h.set("Line1/Tank/Level", 95.0)
	h.wantState(hiID, ActiveUnacked) // the state is live even when the journal fails
	select { // and the operator is told: annunciation does not wait for the disk
	case tr := <-ch:
		if tr.Event != EventActivate || tr.Seq != 0 {
			t.Errorf("transition while the journal fails: %s seq %d, want the activation with seq 0 (not journaled yet)", tr.Event, tr.Seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the activation was not told while the journal fails")
	}
	if _, err := h.e.Ack(operator, []string{hiID}, false); err == nil || !strings.Contains(err.Error(), "alarm journal cannot commit") {
		t.Fatalf("ack while the journal fails: %v", err)
	}
	h.wantState(hiID, ActiveUnacked)
	if hl := h.e.Health(); len(hl) == 0 || !strings.Contains(hl[0], "alarm journal cannot commit") {
		t.Errorf("health %q", hl)
	}
	j.fail.Store(false)
	h.set("Line1/Tank/Level", 96.0) // the next commit carries the entries the failed one held
	if j.committed != 1 {
		t.Errorf("entries committed after recovery: %d", j.committed)
	}
	if res, err := h.e.Ack(operator, []string{hiID}, false); err != nil || res[0].Status != value.Good {
		t.Errorf("ack after recovery %+v %v", res, err)
	}
}

type failingJournal struct {
	fail      atomic.Bool
	committed int
}

func (j *failingJournal) CommitAlarms(es []store.AlarmEntry, _ []store.AlarmState, _ []string) error {
	if j.fail.Load() {
		return errDisk
	}
	j.committed += len(es)
	for i := range es {
		es[i].Seq = uint64(j.committed - len(es) + i + 1)
	}
	return nil
}
func (j *failingJournal) LoadAlarmStates() (map[string][]byte, error) { return nil, nil }
func (j *failingJournal) QueryAlarmJournal(store.AlarmQuery) ([]store.AlarmEntry, uint64, error) {
	return nil, 0, nil
}
func (j *failingJournal) ScanAlarmJournal(time.Time, int, func(store.AlarmEntry) bool) error {
	return nil
}
func (j *failingJournal) PruneAlarmJournal(time.Time, int64) (int, error) { return 0, nil }
func (j *failingJournal) AlarmJournalInfo() (store.AlarmJournalInfo, error) {
	return store.AlarmJournalInfo{}, nil
}

type diskErr struct{}

func (diskErr) Error() string { return "input/output error" }

var errDisk = diskErr{}
