package opcua

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

// The driver passes the conformance suite of every device.Driver against a
// real node-opcua server.
func TestDriver_Conformance(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	pki := t.TempDir()
	devicetest.Run(t, func(t *testing.T) (device.Driver, []device.Point) {
		cfg := testConfig(t, srv, pki)
		return NewDriver("ua1", cfg, testLogger(t)), []device.Point{
			vpoint("Double", value.Auto), vpoint("Int32", value.Int32), vpoint("String", value.String),
		}
	})
}

func TestDriver_Browse_Children(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	root, err := d.Browse(t.Context(), "")
	if err != nil {
		t.Fatalf("Browse(Objects): %v", err)
	}
	var plc *device.BrowseResult
	for i := range root {
		if root[i].NodeID == "nsu=urn:vendor:plc;s=Plc" {
			plc = &root[i]
		}
	}
	if plc == nil || plc.BrowseName != "Plc" || plc.NodeClass != "Object" {
		t.Fatalf("Objects children %+v: want the Plc folder as nsu=urn:vendor:plc;s=Plc", root)
	}
	kids, err := d.Browse(t.Context(), plc.NodeID)
	if err != nil {
		t.Fatalf("Browse(Plc): %v", err)
	}
	byName := map[string]device.BrowseResult{}
	for _, k := range kids {
		byName[k.BrowseName] = k
	}
	for _, want := range []device.BrowseResult{
		{NodeID: "nsu=urn:vendor:plc;s=Int32", BrowseName: "Int32", NodeClass: "Variable", DataType: "Int32", Writable: true},
		{NodeID: "nsu=urn:vendor:plc;s=ReadOnly", BrowseName: "ReadOnly", NodeClass: "Variable", DataType: "Double", Writable: false},
		{NodeID: "nsu=urn:vendor:plc;s=UtcTime", BrowseName: "UtcTime", NodeClass: "Variable", DataType: "UtcTime", Writable: true},
		{NodeID: "nsu=urn:vendor:plc;s=Enum", BrowseName: "Enum", NodeClass: "Variable", DataType: "ServerState", Writable: true},
	} {
		if got := byName[want.BrowseName]; got != want {
			t.Errorf("child %s = %+v, want %+v", want.BrowseName, got, want)
		}
	}
	// The browsed node id reads the node.
	if v := readOne(t, d, device.Point{Tag: "x", Address: byName["Int32"].NodeID, Type: value.Auto}); !isGood(v) {
		t.Errorf("Read of the browsed node id: %s", v.Quality)
	}
	_, err = d.Browse(t.Context(), "nsu=urn:vendor:plc;s=NoSuchNode")
	var qe *device.QualityError
	if !errors.As(err, &qe) || qe.Quality != value.BadNodeIDUnknown {
		t.Errorf("Browse(unknown) = %v, want Bad_NodeIdUnknown", err)
	}
}

// C15 (a): forced TCP resets of the gateway's connection; the server allows
// 5 sessions. The gateway re-activates its session instead of creating one
// each time: the server never holds more than 2 sessions for it and never
// answers BadTooManySessions. (Case: 20 resets 5 s apart; scaled: 8 resets
// 0.5 s apart.)
func TestDriver_Session_C15ResetsDoNotLeakSessions(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--max-sessions", "5")
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	cfg := testConfig(t, srv, t.TempDir())
	cfg.URL = fmt.Sprintf("opc.tcp://127.0.0.1:%d", px.Port())
	d := openDriver(t, cfg)
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Counter", value.Auto))
	waitValue(t, r, 0, 5*time.Second, "Counter", isGood)
	for i := 0; i < 8; i++ {
		px.Reset()
		time.Sleep(500 * time.Millisecond)
	}
	waitState(t, d, "connected", 5*time.Second)
	// No session leaks: once the resets are over the server holds at most
	// the driver's session (and one being closed); a leaked one would stay
	// until the server's session timeout (20 s here, longer than the resets and this wait).
	waitFor(t, 5*time.Second, "the server's sessions back to at most 2", func() bool { return srv.Stats().Sessions <= 2 })
	n := r.count(0)
	waitFor(t, 3*time.Second, "Counter values after the resets", func() bool { return r.count(0) > n+2 })
	st := srv.Stats()
	if st.CreatedSessions > 2 {
		t.Errorf("the server created %d sessions over 8 resets, want the session re-activated (at most 2)", st.CreatedSessions)
	}
	if _, why := d.State(); strings.Contains(why, "TooManySessions") {
		t.Errorf("state reason %q", why)
	}
}

// C15 (b): each shutdown sends CloseSession with DeleteSubscriptions; the
// server's session count returns to 0 within 1 s of Close. (Case: 10
// restarts within a minute.)
func TestDriver_Session_C15CloseFreesSession(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--max-sessions", "5")
	cfg := testConfig(t, srv, t.TempDir())
	for i := 0; i < 10; i++ {
		d := NewDriver("ua1", cfg, testLogger(t))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.Open(ctx); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithCancel(context.Background())
		if err := d.Subscribe(rctx, []device.Point{vpoint("Temp", value.Auto)}, func(int, value.VQT) {}); err != nil {
			t.Fatal(err)
		}
		if st, why := d.State(); st != "connected" {
			t.Fatalf("run %d: state %s %s", i, st, why)
		}
		waitFor(t, 3*time.Second, "the subscription", func() bool { return srv.Stats().Subscriptions == 1 })
		if err := d.Close(ctx); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		waitFor(t, time.Second, "the server's session count to return to 0", func() bool {
			st := srv.Stats()
			return st.Sessions == 0 && st.Subscriptions == 0
		})
		if el := time.Since(closed); el > time.Second {
			t.Errorf("run %d: sessions freed %s after Close", i, el)
		}
		rcancel()
		cancel()
	}
	if st := srv.Stats(); st.ClosedSessions["CloseSession"] != 10 || st.ClosedDeleting != 10 {
		t.Errorf("sessions closed by CloseSession: %v, %d deleting their subscriptions; want 10 and 10", st.ClosedSessions, st.ClosedDeleting)
	}
}

// C15: a server that answers BadTooManySessions makes the driver back off
// (at least 5 × reconnect_min, doubling), with the status name in its
// state — no tight retry loop.
func TestDriver_Session_C15TooManySessionsBacksOff(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--max-sessions", "1")
	cfg := testConfig(t, srv, t.TempDir())
	cfg.ReconnectMin = device.Duration(100 * time.Millisecond)
	cfg.ReconnectMax = device.Duration(2 * time.Second)
	first := openDriver(t, cfg)
	waitState(t, first, "connected", 5*time.Second)
	second := openDriver(t, cfg)
	waitFor(t, 5*time.Second, "BadTooManySessions in the state", func() bool {
		_, why := second.State()
		return strings.Contains(why, "BadTooManySessions")
	})
	n0 := second.attempts.Load()
	time.Sleep(2 * time.Second)
	// Waits of at least 250 ms (half of 5 × 100 ms), doubling: at most 5 attempts in 2 s.
	if n := second.attempts.Load() - n0; n > 5 {
		t.Errorf("%d attempts in 2 s against BadTooManySessions, want at most 5", n)
	}
	if v := readOne(t, second, vpoint("Double", value.Auto)); v.Quality != value.BadNotConnected {
		t.Errorf("Read = %s, want Bad_NotConnected", v.Quality)
	}
}

// C16: no subscription, only polling, with a short session timeout: the
// driver keeps the session alive (a read of ServerStatus.CurrentTime at
// half the revised timeout), so every poll is Good and one session serves
// them all. (Case: session 10 s, a poll every 30 s for 5 minutes; scaled
// 1:20.)
func TestDriver_Session_C16PollingKeepsSessionAlive(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	cfg := testConfig(t, srv, t.TempDir())
	cfg.SessionTimeout = device.Duration(500 * time.Millisecond)
	d := openDriver(t, cfg)
	p := vpoint("Double", value.Float64)
	for i := 0; i < 5; i++ {
		time.Sleep(1500 * time.Millisecond)
		if v := readOne(t, d, p); !isGood(v) || v.Value != 2.718281828459045 {
			t.Fatalf("poll %d: %v %s %s", i, v.Value, v.Quality, v.Reason)
		}
	}
	if st := srv.Stats(); st.CreatedSessions != 1 {
		t.Errorf("the server created %d sessions, want 1", st.CreatedSessions)
	}
}

// C16: a session that the server dropped (BadSessionIdInvalid) is re-made
// once and the read retried once: the caller still gets Good.
func TestDriver_Session_C16SessionLostRetriedOnce(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	p := vpoint("Double", value.Float64)
	if v := readOne(t, d, p); !isGood(v) {
		t.Fatalf("first read: %s", v.Quality)
	}
	srv.Cmd("kill-sessions")
	if v := readOne(t, d, p); !isGood(v) || v.Value != 2.718281828459045 {
		t.Fatalf("read after the server dropped the session: %v %s %s, want Good", v.Value, v.Quality, v.Reason)
	}
	time.Sleep(500 * time.Millisecond)
	if st := srv.Stats(); st.CreatedSessions != 2 || st.Sessions != 1 {
		t.Errorf("server: %d sessions created, %d open; want 2 and 1 (one new session, no loop)", st.CreatedSessions, st.Sessions)
	}
}

// Reads whose context ends early never break the secure channel (gopcua
// v0.8.0 burns a sequence number for a request abandoned before it is
// written, and the server then closes the channel; see guarded).
func TestDriver_Read_CancelledContextKeepsChannel(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	p := vpoint("Double", value.Float64)
	attempts := d.attempts.Load()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if v := d.Read(done, []device.Point{p})[0]; v.Quality == value.Good {
		t.Errorf("Read with a cancelled context = Good")
	}
	for i := 0; i < 40; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%8)*100*time.Microsecond)
		d.Read(ctx, []device.Point{p, vpoint("Int32", value.Auto)})
		cancel()
	}
	time.Sleep(300 * time.Millisecond)
	if v := readOne(t, d, p); !isGood(v) {
		t.Fatalf("Read after cancelled reads: %s %s", v.Quality, v.Reason)
	}
	if n := d.attempts.Load(); n != attempts {
		t.Errorf("%d reconnections after cancelled reads, want 0", n-attempts)
	}
	if st := srv.Stats(); st.CreatedSessions != 1 {
		t.Errorf("the server created %d sessions, want 1", st.CreatedSessions)
	}
}
