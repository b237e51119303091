package tagengine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// fakeDriver records writes and serves reads from a map.
type fakeDriver struct {
	mu      sync.Mutex
	vals    map[string]value.VQT
	writes  []string
	readErr value.Quality
}

func newFake() *fakeDriver { return &fakeDriver{vals: map[string]value.VQT{}} }

func (f *fakeDriver) Validate() error                 { return nil }
func (f *fakeDriver) CheckPoint(p device.Point) error { return nil }
func (f *fakeDriver) Open(context.Context) error      { return nil }
func (f *fakeDriver) Close(context.Context) error     { return nil }
func (f *fakeDriver) Read(_ context.Context, ps []device.Point) []value.VQT {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]value.VQT, len(ps))
	for i, p := range ps {
		if f.readErr != value.Good && f.readErr != 0 {
			out[i] = value.Bad(f.readErr, "device away", time.Now())
			continue
		}
		v, ok := f.vals[p.Address]
		if !ok {
			v = value.VQT{Value: int64(0), Quality: value.Good, Time: time.Now()}
		}
		out[i] = v
	}
	return out
}
func (f *fakeDriver) Write(_ context.Context, p device.Point, v value.Value) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("%s=%v", p.Address, v))
	f.vals[p.Address] = value.VQT{Value: v, Quality: value.Good, Time: time.Now()}
	return nil
}
func (f *fakeDriver) nwrites() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.writes) }

type failingLevels struct{}

func (failingLevels) WriteLevels(context.Context, []string) (map[string]auth.Level, error) {
	return nil, errors.New("level store unreachable")
}

type memAudit struct {
	mu  sync.Mutex
	evs []AuditEvent
	err error
}

func (a *memAudit) CanAudit() error { return a.err }
func (a *memAudit) Audit(ev AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

func newEngine(t *testing.T, cfg Config) (*Engine, *fakeDriver) {
	t.Helper()
	drv := newFake()
	tags := []Tag{
		{Path: "L/View", Device: "d", Point: device.Point{Address: "v", Type: value.Int16}, WriteLevel: auth.LevelView},
		{Path: "L/Operate", Device: "d", Point: device.Point{Address: "o", Type: value.Int16}, WriteLevel: auth.LevelOperate},
		{Path: "L/Supervise", Device: "d", Point: device.Point{Address: "s", Type: value.Int16}, WriteLevel: auth.LevelSupervise},
		{Path: "L/Design", Device: "d", Point: device.Point{Address: "x", Type: value.Int16}, WriteLevel: auth.LevelDesign},
		{Path: "L/Baseline", Device: "d", Point: device.Point{Address: "b", Type: value.Int16}},
		{Path: "L/RO", Device: "d", Point: device.Point{Address: "r", Type: value.Int16}, ReadOnly: true},
		{Path: "L/Scaled", Device: "d", Point: device.Point{Address: "sc", Type: value.Int16}, Scale: Scale{Factor: 0.1}},
	}
	e, err := New(cfg, map[string]device.Driver{"d": drv}, tags)
	if err != nil {
		t.Fatal(err)
	}
	return e, drv
}

// TestEngine_Write_ScopeAndLevelMatrix walks every combination of scope
// present/absent and grant level against tags of every level: a write reaches
// the driver if and only if the scope is held and grant level >= tag level.
func TestEngine_Write_ScopeAndLevelMatrix(t *testing.T) {
	levels := []auth.Level{auth.LevelView, auth.LevelOperate, auth.LevelSupervise, auth.LevelDesign}
	tagOf := map[auth.Level]string{auth.LevelView: "L/View", auth.LevelOperate: "L/Operate",
		auth.LevelSupervise: "L/Supervise", auth.LevelDesign: "L/Design"}
	for _, hasScope := range []bool{true, false} {
		for _, gl := range levels {
			for _, tl := range levels {
				name := fmt.Sprintf("scope=%v/grant=%s/tag=%s", hasScope, gl, tl)
				t.Run(name, func(t *testing.T) {
					audit := &memAudit{}
					e, drv := newEngine(t, Config{Audit: audit})
					g := auth.Grant{Principal: "t", WriteLevel: gl}
					if hasScope {
						g.Scopes = []auth.Scope{auth.TagWrite}
					}
					res, err := e.Write(context.Background(), g, []WriteRequest{{Path: tagOf[tl], Value: int64(5)}})
					if !hasScope {
						var de *auth.DeniedError
						if !errors.As(err, &de) || de.Need != "tag:write" {
							t.Fatalf("err = %v, want DeniedError naming tag:write", err)
						}
						if drv.nwrites() != 0 {
							t.Fatal("write reached the driver without tag:write")
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					want := value.Good
					if gl < tl {
						want = value.BadUserAccessDenied
					}
					if res[0].Quality != want {
						t.Fatalf("quality = %s (%s), want %s", res[0].Quality, res[0].Reason, want)
					}
					if got := drv.nwrites(); (want == value.Good) != (got == 1) {
						t.Fatalf("driver writes = %d, want quality %s", got, want)
					}
					if want != value.Good && res[0].Reason == "" {
						t.Fatal("refusal without a reason")
					}
					if len(audit.evs) != 1 {
						t.Fatalf("audit records = %d, want 1", len(audit.evs))
					}
				})
			}
		}
	}
}

func TestEngine_Write_FailedLevelLookupRefusesWholeBatch(t *testing.T) {
	e, drv := newEngine(t, Config{Levels: failingLevels{}})
	g := auth.Full("t", auth.RealmPlatform, "test")
	_, err := e.Write(context.Background(), g, []WriteRequest{{Path: "L/View", Value: 1}, {Path: "L/Operate", Value: 2}})
	if !errors.Is(err, ErrLevelLookup) {
		t.Fatalf("err = %v, want ErrLevelLookup", err)
	}
	if drv.nwrites() != 0 {
		t.Fatalf("driver got %d writes after a failed level lookup", drv.nwrites())
	}
}

func TestEngine_Write_MixedBatchKeepsGoodOnes(t *testing.T) {
	e, drv := newEngine(t, Config{})
	g := auth.Grant{Scopes: []auth.Scope{auth.TagWrite}, WriteLevel: auth.LevelOperate}
	res, err := e.Write(context.Background(), g, []WriteRequest{
		{Path: "L/Supervise", Value: 1},
		{Path: "L/Operate", Value: 2},
		{Path: "L/Nope", Value: 3},
		{Path: "L/RO", Value: 4},
		{Path: "L/Baseline", Value: 40000},
		{Path: "L/Baseline", Value: "x"},
		{Path: "L/Baseline", Value: -20},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []value.Quality{value.BadUserAccessDenied, value.Good, value.BadNodeIDUnknown,
		value.BadNotWritable, value.BadOutOfRange, value.BadTypeMismatch, value.Good}
	for i, w := range want {
		if res[i].Quality != w {
			t.Errorf("write %d (%s): %s (%s), want %s", i, res[i].Path, res[i].Quality, res[i].Reason, w)
		}
	}
	if drv.nwrites() != 2 {
		t.Fatalf("driver writes = %v", drv.writes)
	}
}

func TestEngine_Write_PrefixesAndScale(t *testing.T) {
	e, drv := newEngine(t, Config{})
	g := auth.Grant{Scopes: []auth.Scope{auth.TagWrite}, WriteLevel: auth.LevelDesign, Prefixes: []string{"L/Scaled"}}
	res, _ := e.Write(context.Background(), g, []WriteRequest{{Path: "L/Scaled", Value: 12.3}, {Path: "L/Operate", Value: 1}})
	if res[0].Quality != value.Good || res[1].Quality != value.BadUserAccessDenied {
		t.Fatalf("results %+v", res)
	}
	if drv.writes[0] != "sc=123" {
		t.Fatalf("scaled write sent %v, want raw 123", drv.writes)
	}
}

func TestEngine_Write_AuditUnavailableRefuses(t *testing.T) {
	e, drv := newEngine(t, Config{Audit: &memAudit{err: errors.New("queue full")}})
	res, _ := e.Write(context.Background(), auth.Full("t", auth.RealmPlatform, "t"), []WriteRequest{{Path: "L/View", Value: 1}})
	if res[0].Quality == value.Good || drv.nwrites() != 0 {
		t.Fatalf("write went through without an audit record: %+v", res)
	}
}

func TestEngine_Read_UnknownAndPrefix(t *testing.T) {
	e, _ := newEngine(t, Config{})
	g := auth.Grant{Scopes: []auth.Scope{auth.TagRead}, Prefixes: []string{"L/View"}}
	res, err := e.Read(g, []string{"L/View", "L/Operate", "Nope", "L/View/Nope"})
	if err != nil {
		t.Fatal(err)
	}
	// An unknown path outside the prefixes is refused like a known one;
	// only inside them does "unknown" show.
	if res[0].Quality != value.BadWaitingForInitialData || res[1].Quality != value.BadUserAccessDenied ||
		res[2].Quality != value.BadUserAccessDenied || res[3].Quality != value.BadNodeIDUnknown {
		t.Fatalf("qualities %v %v %v %v", res[0].Quality, res[1].Quality, res[2].Quality, res[3].Quality)
	}
	if _, err := e.Read(auth.Grant{}, []string{"L/View"}); err == nil {
		t.Fatal("read without tag:read allowed")
	}
}

func TestEngine_Scan_SeedThenGoodThenBad(t *testing.T) {
	drv := newFake()
	drv.vals["a"] = value.VQT{Value: int64(7), Quality: value.Good}
	e, err := New(Config{}, map[string]device.Driver{"d": drv}, []Tag{{Path: "A", Device: "d", Scan: 10 * time.Millisecond, Point: device.Point{Address: "a", Type: value.Int16}}})
	if err != nil {
		t.Fatal(err)
	}
	e.Seed(map[string]value.VQT{"A": {Value: int64(3), Quality: value.Good, Time: time.Now()}})
	g := auth.Grant{Scopes: []auth.Scope{auth.TagRead}}
	r, _ := e.Read(g, []string{"A"})
	if r[0].Quality != value.UncertainLastUsableValue || r[0].Value != int64(3) {
		t.Fatalf("seeded = %+v", r[0])
	}
	ch, _, cancel := e.Subscribe(16)
	defer cancel()
	drv.readErr = value.BadNotConnected
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	// The device is away: the seeded value stays Uncertain_LastUsableValue.
	c := waitQuality(t, ch, value.UncertainLastUsableValue)
	if c.Value != int64(3) || c.Reason == "" {
		t.Fatalf("seeded value while the device is away: %+v", c)
	}
	drv.mu.Lock()
	drv.readErr = value.Good
	drv.mu.Unlock()
	waitQuality(t, ch, value.Good)
	drv.mu.Lock()
	drv.readErr = value.BadNotConnected
	drv.mu.Unlock()
	c = waitQuality(t, ch, value.BadNotConnected)
	if c.Value != int64(7) {
		t.Fatalf("bad VQT lost the last known value: %+v", c)
	}
}

func waitQuality(t *testing.T, ch <-chan Change, q value.Quality) Change {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case c := <-ch:
			if c.Quality == q {
				return c
			}
		case <-timer.C:
			t.Fatalf("no change to %s", q)
		}
	}
}

func TestDeadband_Exceeded(t *testing.T) {
	cases := []struct {
		name     string
		d        Deadband
		old, new value.Value
		want     bool
	}{
		{"none-equal", Deadband{}, 1.0, 1.0, false},
		{"none-diff", Deadband{}, 1.0, 1.01, true},
		{"abs-below", Deadband{Absolute: 0.5}, 10.0, 10.4, false},
		{"abs-above", Deadband{Absolute: 0.5}, 10.0, 10.6, true},
		{"pct-below", Deadband{Percent: 10}, 100.0, 109.0, false},
		{"pct-above", Deadband{Percent: 10}, 100.0, 111.0, true},
		{"string", Deadband{Absolute: 5}, "a", "b", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.d.Exceeded(c.old, c.new); got != c.want {
				t.Fatalf("Exceeded(%v,%v) = %v", c.old, c.new, got)
			}
		})
	}
}

// restoringDriver holds values itself (like the simulator's memory) and
// refuses writes to addresses starting with "ro".
type restoringDriver struct {
	*fakeDriver
	restored map[string]value.Value
}

func (r *restoringDriver) Restore(p device.Point, v value.Value) bool {
	r.restored[p.Address] = v
	r.mu.Lock()
	r.vals[p.Address] = value.VQT{Value: v, Quality: value.Good, Time: time.Now()}
	r.mu.Unlock()
	return true
}

func (r *restoringDriver) Writable(p device.Point) bool { return p.Address[:2] != "ro" }

func TestEngine_Seed_RestoresDriverHeldValuesAndMarksReadOnly(t *testing.T) {
	drv := &restoringDriver{fakeDriver: newFake(), restored: map[string]value.Value{}}
	e, err := New(Config{}, map[string]device.Driver{"d": drv}, []Tag{
		{Path: "Mem", Device: "d", Scan: 10 * time.Millisecond, Point: device.Point{Address: "mem", Type: value.Float64}, Scale: Scale{Factor: 0.1}},
		{Path: "Gen", Device: "d", Point: device.Point{Address: "ro-gen", Type: value.Float64}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Seed(map[string]value.VQT{"Mem": {Value: 32.1, Quality: value.Good, Time: time.Now()}})
	if got := drv.restored["mem"]; got != 321.0 {
		t.Fatalf("driver got %v back, want the raw 321 (scale 0.1 undone)", got)
	}
	infos := e.Tags(auth.Full("t", auth.RealmPlatform, ""))
	if infos[0].Path != "Gen" || !infos[0].ReadOnly || infos[1].ReadOnly {
		t.Fatalf("read-only from the driver: %+v", infos)
	}
	res, _ := e.Write(context.Background(), auth.Full("t", auth.RealmPlatform, ""), []WriteRequest{{Path: "Gen", Value: 1.0}})
	if res[0].Quality != value.BadNotWritable {
		t.Fatalf("write to a generator: %+v", res[0])
	}
	ch, _, cancel := e.Subscribe(16)
	defer cancel()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	var c Change
	for c = waitQuality(t, ch, value.Good); c.Path != "Mem"; c = waitQuality(t, ch, value.Good) {
	}
	if !value.Equal(c.Value, 32.1) {
		t.Fatalf("restored value after start: %+v", c)
	}
}

// pushDriver pushes changes like OPC UA monitored items.
type pushDriver struct {
	*fakeDriver
	interval time.Duration
	fn       func(int, value.VQT)
	ready    chan struct{}
}

func (p *pushDriver) SubscribeInterval(_ context.Context, iv time.Duration, pts []device.Point, fn func(int, value.VQT)) error {
	p.interval, p.fn = iv, fn
	close(p.ready)
	return nil
}

func TestEngine_Start_SubscribesInsteadOfPolling(t *testing.T) {
	drv := &pushDriver{fakeDriver: newFake(), ready: make(chan struct{})}
	e, err := New(Config{}, map[string]device.Driver{"ua": drv}, []Tag{
		{Path: "A", Device: "ua", Scan: 250 * time.Millisecond, Point: device.Point{Address: "a", Type: value.Float64}},
		{Path: "B", Device: "ua", Scan: 250 * time.Millisecond, Point: device.Point{Address: "b", Type: value.Float64}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, _, cancel := e.Subscribe(16)
	defer cancel()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	<-drv.ready
	if drv.interval != 250*time.Millisecond {
		t.Fatalf("subscription interval %v, want the scan class 250ms", drv.interval)
	}
	drv.fn(1, value.VQT{Value: 4.5, Quality: value.Good, Time: time.Now()})
	c := waitQuality(t, ch, value.Good)
	if c.Path != "B" || c.Value != 4.5 {
		t.Fatalf("pushed change: %+v", c)
	}
	if scans, _ := e.Stats(); scans != 0 {
		t.Fatalf("a subscribed group was polled %d times", scans)
	}
}

type syncAudit struct {
	memAudit
	syncs int
}

func (s *syncAudit) SyncAudit(context.Context) error { s.syncs++; return nil }

type memLast struct {
	mu   sync.Mutex
	vals map[string]value.VQT
}

func (m *memLast) SaveLastValues(v map[string]value.VQT) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, x := range v {
		m.vals[k] = x
	}
	return nil
}

// TestEngine_Write_AuditCommittedAndHeldValuePersistedBeforeAnswer: an
// acknowledged write's audit record is committed, and a value the driver
// holds itself (simulator memory) is persisted, before Write returns
// (attack report M4, M5: a kill -9 right after the answer lost both).
func TestEngine_Write_AuditCommittedAndHeldValuePersistedBeforeAnswer(t *testing.T) {
	drv := &restoringDriver{fakeDriver: newFake(), restored: map[string]value.Value{}}
	audit := &syncAudit{}
	last := &memLast{vals: map[string]value.VQT{}}
	e, err := New(Config{Audit: audit, LastValues: last, FlushEvery: time.Hour}, map[string]device.Driver{"d": drv},
		[]Tag{{Path: "Mem", Device: "d", Point: device.Point{Address: "mem", Type: value.Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Write(context.Background(), auth.Full("t", auth.RealmPlatform, ""), []WriteRequest{{Path: "Mem", Value: int64(2009)}})
	if err != nil || res[0].Quality != value.Good {
		t.Fatalf("write: %+v %v", res, err)
	}
	if audit.syncs != 1 {
		t.Fatalf("audit synced %d times before the answer, want 1", audit.syncs)
	}
	if v := last.vals["Mem"]; v.Value != int64(2009) || v.Quality != value.Good {
		t.Fatalf("persisted last value %+v, want 2009 Good", v)
	}
	// A refused write syncs nothing.
	if _, err := e.Write(context.Background(), auth.Grant{Scopes: []auth.Scope{auth.TagWrite}}, []WriteRequest{{Path: "Mem", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if audit.syncs != 1 {
		t.Fatalf("a refused write synced the audit log")
	}
}

// TestEngine_OutsidePrefixes_SameAnswerKnownOrNot: a grant limited to
// prefixes cannot tell a tag that exists outside them from one that does
// not: reads and writes of both answer Bad_UserAccessDenied with the same
// reason, and their audit records differ only in the path.
func TestEngine_OutsidePrefixes_SameAnswerKnownOrNot(t *testing.T) {
	a := &memAudit{}
	e, drv := newEngine(t, Config{Audit: a})
	g := auth.Grant{Scopes: []auth.Scope{auth.TagRead, auth.TagWrite}, WriteLevel: auth.LevelDesign, Prefixes: []string{"L/View"}}
	known, unknown := "L/Operate", "L/Nope"
	res, err := e.Read(g, []string{known, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Quality != value.BadUserAccessDenied || res[1].Quality != res[0].Quality || res[1].Reason != res[0].Reason ||
		res[1].Value != res[0].Value {
		t.Fatalf("read: known %+v, unknown %+v; want the same Bad_UserAccessDenied", res[0].VQT, res[1].VQT)
	}
	wr, err := e.Write(context.Background(), g, []WriteRequest{{Path: known, Value: 1}, {Path: unknown, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if wr[0].Quality != value.BadUserAccessDenied || wr[1].Quality != wr[0].Quality || wr[1].Reason != wr[0].Reason {
		t.Fatalf("write: known %+v, unknown %+v; want the same Bad_UserAccessDenied", wr[0], wr[1])
	}
	if drv.nwrites() != 0 {
		t.Fatalf("driver got %v", drv.writes)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.evs) != 2 {
		t.Fatalf("audit events %+v, want one per refused write", a.evs)
	}
	x, y := a.evs[0], a.evs[1]
	x.Target, y.Target, x.Time, y.Time = "", "", time.Time{}, time.Time{}
	if fmt.Sprint(x) != fmt.Sprint(y) {
		t.Fatalf("audit records differ beyond the path:\n%+v\n%+v", a.evs[0], a.evs[1])
	}
}
