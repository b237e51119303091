package opcua

import (
	"context"
	"fmt"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// subscribe subscribes points on d until the end of the test.
func subscribe(t testing.TB, d *Driver, opts SubscribeOptions, points ...device.Point) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := newRecorder()
	if err := d.SubscribeWith(ctx, opts, points, r.fn); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	return r
}

// waitValue waits until point i's last delivery satisfies ok.
func waitValue(t testing.TB, r *recorder, i int, within time.Duration, what string, ok func(value.VQT) bool) value.VQT {
	t.Helper()
	var last value.VQT
	waitFor(t, within, what, func() bool {
		v, has := r.last(i)
		last = v
		return has && ok(v)
	})
	return last
}

func isGood(v value.VQT) bool { return v.Quality == value.Good }

func counterOf(t testing.TB, v value.VQT) uint64 {
	t.Helper()
	n, ok := v.Value.(uint64)
	if !ok {
		t.Fatalf("Counter value %#v is not a uint64", v.Value)
	}
	return n
}

func TestDriver_Subscribe_DeliversChanges(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Counter", value.Auto), vpoint("Temp", value.Float64))

	first := waitValue(t, r, 0, 5*time.Second, "a first Counter value", isGood)
	waitValue(t, r, 0, 5*time.Second, "Counter to change", func(v value.VQT) bool {
		return isGood(v) && counterOf(t, v) > counterOf(t, first)
	})
	waitValue(t, r, 1, 5*time.Second, "initial Temp 21.5", func(v value.VQT) bool { return isGood(v) && v.Value == 21.5 })
	srv.Cmd("set Temp 33.25")
	v := waitValue(t, r, 1, 5*time.Second, "Temp 33.25", func(v value.VQT) bool { return isGood(v) && v.Value == 33.25 })
	if v.Time.IsZero() || time.Since(v.Time) > 10*time.Second {
		t.Errorf("Temp source time %v: want the server's recent source timestamp", v.Time)
	}
	if st, why := d.State(); st != "connected" {
		t.Errorf("State = %s (%s), want connected", st, why)
	}
	if got := srv.Stats().MonitoredItems; got != 2 {
		t.Errorf("server monitored items = %d, want 2", got)
	}
}

// C11: a short network break; the session survives on the server. Counter
// notifications resume within 3 publishing intervals after the path is
// unblocked, through the same session and subscription (no CloseSession),
// and the silent server is noticed within 3 publishing intervals.
func TestDriver_Subscribe_C11ShortNetworkBreak(t *testing.T) {
	t.Parallel()
	const interval = 250 * time.Millisecond // case: 1 s (scaled 1/4)
	const outage = 2500 * time.Millisecond  // case: 10 s
	srv := startServer(t)
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	cfg := testConfig(t, srv, t.TempDir())
	cfg.URL = fmt.Sprintf("opc.tcp://127.0.0.1:%d", px.Port())
	cfg.PublishingInterval = device.Duration(interval)
	cfg.SessionTimeout = device.Duration(15 * time.Second) // case: 60 s
	cfg.ReconnectMax = device.Duration(interval)
	d := openDriver(t, cfg)
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Counter", value.Auto))
	waitValue(t, r, 0, 5*time.Second, "Counter values", isGood)
	time.Sleep(2 * interval)

	before := r.all(0)
	lastBefore := counterOf(t, before[len(before)-1])
	blocked := time.Now()
	px.Block()
	waitFor(t, 3*interval+time.Second, "the silent server to be noticed", func() bool {
		st, _ := d.State()
		return st != "connected"
	})
	noticed := time.Since(blocked)
	if max := 3*interval + interval/2; noticed > max {
		t.Errorf("silent server noticed after %s, want within 3 publishing intervals (%s)", noticed, max)
	}
	v, _ := r.last(0)
	if v.Quality != value.BadNotConnected {
		t.Errorf("Counter quality during the outage = %s, want Bad_NotConnected", v.Quality)
	}
	time.Sleep(outage - time.Since(blocked))
	n := r.count(0)
	px.Unblock()
	unblocked := time.Now()
	waitFor(t, 3*time.Second, "Counter notifications to resume", func() bool {
		vs := r.all(0)
		for _, v := range vs[n:] {
			if isGood(v) {
				return true
			}
		}
		return false
	})
	resumed := time.Since(unblocked)
	if resumed > 3*interval+500*time.Millisecond {
		t.Errorf("notifications resumed %s after unblock, want within 3 publishing intervals (%s)", resumed, 3*interval)
	}
	vs := r.all(0)
	var firstAfter uint64
	for _, v := range vs[n:] {
		if isGood(v) {
			firstAfter = counterOf(t, v)
			break
		}
	}
	// The server's Counter runs at 50 ms; the gap between the last value
	// before and the first after is at most the outage (plus the detection
	// and reconnection time).
	maxGap := uint64((outage+3*interval+time.Second)/(50*time.Millisecond)) + 2
	if firstAfter <= lastBefore || firstAfter-lastBefore > maxGap {
		t.Errorf("Counter went from %d to %d across the outage, want a gap of at most %d", lastBefore, firstAfter, maxGap)
	}
	st := srv.Stats()
	if st.Sessions != 1 || st.Subscriptions != 1 {
		t.Errorf("server has %d sessions and %d subscriptions, want 1 and 1", st.Sessions, st.Subscriptions)
	}
	if st.CreatedSessions != 1 {
		t.Errorf("server created %d sessions, want 1 (the session is re-activated)", st.CreatedSessions)
	}
	if len(st.ClosedSessions) != 0 {
		t.Errorf("sessions closed during the recovery: %v, want none", st.ClosedSessions)
	}
	// The driver's statistics count the recovery as a reconnect: the
	// session re-activated, none created beyond the first.
	if ds := d.Stats(); ds.Reconnects < 1 || ds.OPCUA.SessionReactivate < 1 || ds.OPCUA.SessionsCreated != 1 {
		t.Errorf("stats: reconnects %d, re-activated %d, created %d; want >= 1, >= 1, 1",
			ds.Reconnects, ds.OPCUA.SessionReactivate, ds.OPCUA.SessionsCreated)
	}
}

// The server is killed and restarted with its namespaces in another order
// (an extra namespace registered first): values flow again, through the
// namespace URI, without restarting the driver.
func TestDriver_Subscribe_ServerRestartNamespacesReordered(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	speed := device.Point{Tag: "Line1/Speed", Address: "ns=2;s=Line1.Speed", Type: value.Float64}
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Counter", value.Auto), speed)
	waitValue(t, r, 0, 5*time.Second, "Counter values", isGood)
	waitValue(t, r, 1, 5*time.Second, "Line1.Speed 42.5", func(v value.VQT) bool { return isGood(v) && v.Value == 42.5 })
	if got := d.ResolvedAddresses()["Line1/Speed"]; got != "nsu=urn:vendor:plc;s=Line1.Speed" {
		t.Fatalf("ResolvedAddresses[Line1/Speed] = %q, want the nsu= form", got)
	}

	srv.Kill()
	waitValue(t, r, 0, 5*time.Second, "Bad_NotConnected while the server is away", func(v value.VQT) bool {
		return v.Quality == value.BadNotConnected
	})
	srv.Start("--extra-ns-first")
	if srv.Namespaces()[2] != "urn:other" || srv.Namespaces()[3] != vendorNS {
		t.Fatalf("restarted server namespaces %v: want urn:other at 2 and %s at 3", srv.Namespaces(), vendorNS)
	}
	n := r.count(1)
	waitValue(t, r, 0, 10*time.Second, "Counter values after the restart", isGood)
	waitValue(t, r, 1, 5*time.Second, "Line1.Speed after the restart", isGood)
	for _, v := range r.all(1)[n:] {
		if v.Quality == value.Good && v.Value != 42.5 {
			t.Fatalf("Line1.Speed = %v after the restart: the driver read ns=2 (urn:other) instead of the vendor namespace", v.Value)
		}
	}
	if v := readOne(t, d, speed); !isGood(v) || v.Value != 42.5 {
		t.Errorf("Read(%s) after the restart = %v %s, want 42.5 Good", speed.Address, v.Value, v.Quality)
	}
}

// C14: a tag configured as nsu=urn:vendor:plc;s=Line1.Speed. Before the
// restart the vendor namespace is index 2, after it index 3, and
// ns=2;s=Line1.Speed then exists in urn:other with another value: the
// driver reads and monitors ns=3 and never ns=2.
func TestDriver_Read_C14NamespaceIndexChanges(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	p := device.Point{Tag: "Line1/Speed", Address: "nsu=urn:vendor:plc;s=Line1.Speed", Type: value.Float64}
	r := subscribe(t, d, SubscribeOptions{}, p)
	if v := readOne(t, d, p); v.Value != 42.5 {
		t.Fatalf("before restart: %v %s, want 42.5", v.Value, v.Quality)
	}
	waitValue(t, r, 0, 5*time.Second, "a monitored value", isGood)
	srv.Stop()
	srv.Start("--extra-ns-first")
	waitState(t, d, "connected", 10*time.Second)
	waitValue(t, r, 0, 5*time.Second, "monitored values after the restart", isGood)
	if v := readOne(t, d, p); v.Value != 42.5 || !isGood(v) {
		t.Errorf("after restart: Read = %v %s, want 42.5 from ns=3 (never the -1 of ns=2)", v.Value, v.Quality)
	}
	for _, v := range r.all(0) {
		if v.Quality == value.Good && v.Value != 42.5 {
			t.Errorf("monitored value %v: the driver monitored the wrong namespace", v.Value)
		}
	}
	if got := d.ResolvedAddresses()["Line1/Speed"]; got != p.Address {
		t.Errorf("ResolvedAddresses = %q, want the URI form %q", got, p.Address)
	}
}

// A node deleted at run time marks only its tag Bad_NodeIdUnknown; the
// others keep flowing, and State is degraded.
func TestDriver_Subscribe_NodeDeletedAtRunTime(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{}, vpoint("A", value.Float64), vpoint("Deletable", value.Float64))
	waitValue(t, r, 0, 5*time.Second, "A", isGood)
	waitValue(t, r, 1, 5*time.Second, "Deletable", isGood)
	srv.Cmd("delete Deletable")
	v := waitValue(t, r, 1, 5*time.Second, "Deletable Bad_NodeIdUnknown", func(v value.VQT) bool {
		return v.Quality == value.BadNodeIDUnknown
	})
	if v.StatusCode&0xFFFF0000 != 0x80340000 && v.StatusCode&0xFFFF0000 != 0x80330000 {
		t.Errorf("Deletable status code 0x%08X, want BadNodeIdUnknown or BadNodeIdInvalid", v.StatusCode)
	}
	srv.Cmd("set A 5.5")
	waitValue(t, r, 0, 5*time.Second, "A 5.5 after the delete", func(v value.VQT) bool { return isGood(v) && v.Value == 5.5 })
	waitState(t, d, StateDegraded, 5*time.Second)
	if _, why := d.State(); !contains(why, "T/Deletable") {
		t.Errorf("State reason %q does not name the bad tag", why)
	}
	if v := readOne(t, d, vpoint("Deletable", value.Float64)); v.Quality != value.BadNodeIDUnknown {
		t.Errorf("Read of the deleted node: %s, want Bad_NodeIdUnknown", v.Quality)
	}
}

// C12: one subscription monitoring A and B; the server restarts with B
// removed. A delivers again, B is Bad_NodeIdUnknown (0x80340000) and
// retried later (it comes back when the server has it again), and the
// state is not healthy while B is bad.
func TestDriver_Subscribe_C12RestartWithNodeRemoved(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{}, vpoint("A", value.Float64), vpoint("B", value.Float64))
	waitValue(t, r, 0, 5*time.Second, "A", isGood)
	waitValue(t, r, 1, 5*time.Second, "B", isGood)

	srv.Stop()
	srv.Start("--without", "B")
	waitState(t, d, StateDegraded, 10*time.Second)
	n := r.count(0)
	srv.Cmd("set A 7.25")
	waitValue(t, r, 0, 5*time.Second, "A 7.25 after the restart", func(v value.VQT) bool { return isGood(v) && v.Value == 7.25 })
	if r.count(0) <= n {
		t.Fatal("A delivered nothing after the restart")
	}
	v := waitValue(t, r, 1, 5*time.Second, "B Bad_NodeIdUnknown", func(v value.VQT) bool { return v.Quality == value.BadNodeIDUnknown })
	if v.StatusCode != 0x80340000 {
		t.Errorf("B status code 0x%08X, want 0x80340000", v.StatusCode)
	}
	if st, _ := d.State(); st == "connected" {
		t.Error("State is connected (healthy) while B is bad")
	}
	if got := srv.Stats().MonitoredItems; got != 1 {
		t.Errorf("server monitored items = %d, want 1 (A only)", got)
	}

	// B is retried: when the server has it again, it flows.
	srv.Stop()
	srv.Start()
	waitValue(t, r, 1, 15*time.Second, "B Good again", isGood)
	waitState(t, d, "connected", 5*time.Second)
}

// C13: one CreateMonitoredItems for Temp (exists) and Tmep (a typo): Temp
// delivers, Tmep is Bad_NodeIdUnknown, and the server ends with exactly one
// monitored item for the gateway.
func TestDriver_Subscribe_C13OneBadNodeInBatch(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Temp", value.Float64), vpoint("Tmep", value.Float64))
	waitValue(t, r, 0, 5*time.Second, "Temp", func(v value.VQT) bool { return isGood(v) && v.Value == 21.5 })
	v := waitValue(t, r, 1, 5*time.Second, "Tmep refused", func(v value.VQT) bool { return v.Quality.IsBad() })
	if v.Quality != value.BadNodeIDUnknown || v.StatusCode != 0x80340000 {
		t.Errorf("Tmep: %s 0x%08X (%s), want Bad_NodeIdUnknown 0x80340000", v.Quality, v.StatusCode, v.Reason)
	}
	srv.Cmd("set Temp 22.5")
	waitValue(t, r, 0, 5*time.Second, "Temp 22.5", func(v value.VQT) bool { return isGood(v) && v.Value == 22.5 })
	if got := srv.Stats().MonitoredItems; got != 1 {
		t.Errorf("server monitored items = %d, want exactly 1", got)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// An absolute deadband filters small changes at the server; a percent
// deadband on a node without EURange is refused by the server, and the
// item is monitored without it.
func TestDriver_Subscribe_Deadband(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{Deadbands: []Deadband{{Absolute: 1.0}, {Percent: 10}}},
		vpoint("Temp", value.Float64), vpoint("A", value.Float64))
	waitValue(t, r, 0, 5*time.Second, "Temp 21.5", func(v value.VQT) bool { return isGood(v) && v.Value == 21.5 })
	waitValue(t, r, 1, 5*time.Second, "A 1", func(v value.VQT) bool { return isGood(v) && v.Value == 1.0 })
	srv.Cmd("set Temp 21.9") // inside the deadband
	srv.Cmd("set A 1.01")    // no filter: delivered
	waitValue(t, r, 1, 5*time.Second, "A 1.01", func(v value.VQT) bool { return isGood(v) && v.Value == 1.01 })
	srv.Cmd("set Temp 23")
	waitValue(t, r, 0, 5*time.Second, "Temp 23", func(v value.VQT) bool { return isGood(v) && v.Value == 23.0 })
	for _, v := range r.all(0) {
		if v.Value == 21.9 {
			t.Errorf("Temp 21.9 delivered through an absolute deadband of 1.0 from 21.5")
		}
	}
	if err := d.SubscribeWith(t.Context(), SubscribeOptions{Deadbands: []Deadband{{}}}, nil, r.fn); err == nil {
		t.Error("SubscribeWith with deadbands for other points = nil error")
	}
}

// Tags the server cannot monitor (too many subscriptions, too many
// monitored items) are polled with Read at the publishing interval, and
// their changes delivered all the same.
func TestDriver_Subscribe_PolledWhenNotMonitorable(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--max-subscriptions", "1", "--max-items", "1")
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r1 := subscribe(t, d, SubscribeOptions{}, vpoint("A", value.Float64), vpoint("B", value.Float64))
	waitValue(t, r1, 0, 5*time.Second, "A", isGood)
	waitValue(t, r1, 1, 5*time.Second, "B (over the item limit)", isGood)
	r2 := subscribe(t, d, SubscribeOptions{}, vpoint("Temp", value.Float64))
	waitValue(t, r2, 0, 5*time.Second, "Temp (over the subscription limit)", isGood)
	srv.Cmd("set B 9.5")
	srv.Cmd("set Temp 30.5")
	waitValue(t, r1, 1, 5*time.Second, "B 9.5", func(v value.VQT) bool { return isGood(v) && v.Value == 9.5 })
	waitValue(t, r2, 0, 5*time.Second, "Temp 30.5", func(v value.VQT) bool { return isGood(v) && v.Value == 30.5 })
	st := srv.Stats()
	if st.Subscriptions != 1 || st.MonitoredItems != 1 {
		t.Errorf("server: %d subscriptions, %d items; want 1 and 1", st.Subscriptions, st.MonitoredItems)
	}
	if s, why := d.State(); s != "connected" {
		t.Errorf("State = %s %s, want connected (polled tags are not bad)", s, why)
	}
	n := r1.count(1)
	time.Sleep(time.Second)
	// Every delivery is a change of value or quality: a polled value that
	// stays the same is not delivered again (a poll that timed out on a
	// loaded machine is a change of quality, and so is its recovery).
	all := r1.all(1)
	for i := max(n, 1); i < len(all); i++ {
		if all[i].Quality == all[i-1].Quality && all[i].Value == all[i-1].Value {
			t.Errorf("B delivered again without a change: %v then %v", all[i-1], all[i])
		}
	}
}

// ns= addresses of the checked tags are converted to the nsu= form at the
// first successful connection, and the converted form is used from then
// on, also after the server re-ordered its namespaces.
func TestDriver_ResolvedAddresses_ConvertedAtFirstConnection(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := NewDriver("ua1", testConfig(t, srv, t.TempDir()), testLogger(t))
	points := []device.Point{
		{Tag: "vendor", Address: "ns=2;s=Line1.Speed", Type: value.Float64},
		{Tag: "other", Address: "ns=3;s=Line1.Speed", Type: value.Float64},
		{Tag: "uri", Address: "nsu=urn:vendor:plc;s=Temp", Type: value.Auto},
		{Tag: "std", Address: "i=2258", Type: value.Auto},
		{Tag: "nowhere", Address: "ns=9;s=X", Type: value.Auto},
	}
	for _, p := range points {
		if err := d.CheckPoint(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	want := map[string]string{
		"vendor": "nsu=urn:vendor:plc;s=Line1.Speed",
		"other":  "nsu=urn:other;s=Line1.Speed",
		"uri":    "nsu=urn:vendor:plc;s=Temp",
		"std":    "i=2258",
	}
	got := d.ResolvedAddresses()
	if len(got) != len(want) {
		t.Errorf("ResolvedAddresses = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ResolvedAddresses[%s] = %q, want %q", k, got[k], v)
		}
	}
	srv.Stop()
	srv.Start("--extra-ns-first")
	waitState(t, d, "connected", 10*time.Second)
	vs := d.Read(t.Context(), points[:2])
	if vs[0].Value != 42.5 || vs[1].Value != -1.0 {
		t.Errorf("after the re-order: vendor %v, other %v; want 42.5 and -1 (the converted URIs)", vs[0].Value, vs[1].Value)
	}
}

// A monitored item that disappears from the server (the connection stays
// up) is noticed by counting the live items against the configured ones,
// and re-created: never "connected" with nothing flowing.
func TestDriver_Subscribe_MissingItemRebuilt(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Temp", value.Float64), vpoint("A", value.Float64))
	waitValue(t, r, 0, 5*time.Second, "Temp", isGood)
	waitValue(t, r, 1, 5*time.Second, "A", isGood)
	if got := srv.Cmd("drop-items Temp")["dropped"]; got != 1.0 {
		t.Fatalf("dropped %v monitored items on the server, want 1", got)
	}
	waitFor(t, 5*time.Second, "the item to be re-created", func() bool { return srv.Stats().MonitoredItems == 2 })
	srv.Cmd("set Temp 40.5")
	waitValue(t, r, 0, 5*time.Second, "Temp 40.5 through the re-created item", func(v value.VQT) bool { return isGood(v) && v.Value == 40.5 })
	if st := srv.Stats(); st.CreatedSessions != 1 || st.Subscriptions != 1 {
		t.Errorf("server: %d sessions created, %d subscriptions; want 1 and 1", st.CreatedSessions, st.Subscriptions)
	}
}
