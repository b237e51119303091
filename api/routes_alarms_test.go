package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// fakeAlarms is the service layer's alarms: one active unacknowledged
// alarm, the calls recorded.
type fakeAlarms struct {
	mu     sync.Mutex
	grants []auth.Grant
	calls  []string
	subs   []chan gateway.AlarmEvent
	none   bool // no alarm is active (the summary's highest is none)
}

var fakeAlarm = gateway.Alarm{ID: "Line1/Tank/Level:High", Name: "High", Source: "Line1/Tank/Level", DisplayPath: "Tank 1 / High level",
	Priority: "high", Mode: "above", AckMode: "manual", State: "active_unacked", Active: true, Evaluable: true,
	Message: "Tank level high: 93.2 %", Value: 93.2, Units: "%", Quality: value.Good, Setpoint: f64(90),
	ActiveSince: testNow, LastChange: testNow, AckLevel: auth.LevelOperate, ShelveLevel: auth.LevelSupervise, Notes: []gateway.AlarmNote{}}

func (f *fakeAlarms) record(g auth.Grant, call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants = append(f.grants, g)
	f.calls = append(f.calls, call)
}

func (f *fakeAlarms) ListAlarms(_ context.Context, g auth.Grant, flt gateway.AlarmFilter) (gateway.AlarmList, error) {
	f.record(g, "list "+strings.Join(flt.States, ",")+" "+strings.Join(flt.Priorities, ","))
	return gateway.AlarmList{Alarms: []gateway.Alarm{fakeAlarm}, Unacked: 1, Active: 1, Highest: "high"}, nil
}
func (f *fakeAlarms) AlarmJournal(_ context.Context, g auth.Grant, q gateway.AlarmJournalQuery) (gateway.AlarmJournalPage, error) {
	f.record(g, "journal")
	return gateway.AlarmJournalPage{Entries: []gateway.AlarmJournalEntry{{Seq: 7, At: testNow, ID: fakeAlarm.ID, Source: fakeAlarm.Source,
		Priority: "high", Event: "activate", From: "normal", To: "active_unacked", Cause: "value 93.2 > setpoint 90", Value: int64(93), Quality: value.Good}},
		Next: 7}, nil
}
func (f *fakeAlarms) AlarmStats(_ context.Context, g auth.Grant, w time.Duration) (gateway.AlarmStats, error) {
	f.record(g, "stats "+w.String())
	return gateway.AlarmStats{Window: w, Activations: 12, RatePer10Min: 2, RatePerHour: 12, Floods: 1, Top: []gateway.AlarmCount{{ID: fakeAlarm.ID, Count: 12}}}, nil
}
func (f *fakeAlarms) AckAlarms(_ context.Context, g auth.Grant, ids []string, all bool) ([]gateway.AlarmResult, error) {
	f.record(g, "ack "+strings.Join(ids, ","))
	return []gateway.AlarmResult{{ID: fakeAlarm.ID, Status: value.Good}}, nil
}
func (f *fakeAlarms) ShelveAlarms(_ context.Context, g auth.Grant, ids []string, d time.Duration, oneShot bool) ([]gateway.AlarmResult, error) {
	f.record(g, "shelve "+d.String())
	return []gateway.AlarmResult{{ID: ids[0], Status: value.BadUserAccessDenied, Reason: `shelving this alarm needs write level "supervise"`}}, nil
}
func (f *fakeAlarms) UnshelveAlarms(_ context.Context, g auth.Grant, ids []string) ([]gateway.AlarmResult, error) {
	f.record(g, "unshelve")
	return nil, nil
}
func (f *fakeAlarms) AddAlarmNote(_ context.Context, g auth.Grant, id, text string) error {
	f.record(g, "note "+text)
	return nil
}
func (f *fakeAlarms) AlarmSummary(_ context.Context, g auth.Grant) (gateway.AlarmSummary, error) {
	if f.none {
		return gateway.AlarmSummary{}, nil
	}
	return gateway.AlarmSummary{Unacked: 1, Active: 1, Highest: "high"}, nil
}
func (f *fakeAlarms) SubscribeAlarms(g auth.Grant, buf int) (<-chan gateway.AlarmEvent, func() uint64, func()) {
	ch := make(chan gateway.AlarmEvent, buf)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, func() uint64 { return 0 }, func() {}
}
func (f *fakeAlarms) AlarmMetrics(context.Context) gateway.AlarmMetrics {
	return gateway.AlarmMetrics{}
}

func (f *fakeAlarms) publish(ev gateway.AlarmEvent) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		ch <- ev
	}
	return len(f.subs)
}

func newAlarmEnv(t *testing.T) (*lvEnv, *fakeAlarms) {
	e := newLVEnv(t, Config{})
	fa := &fakeAlarms{}
	e.srv.deps.Alarms = fa
	return e, fa
}

func TestAlarmRoutes_WireShape(t *testing.T) {
	e, fa := newAlarmEnv(t)
	bearer := map[string]string{"Authorization": "Bearer " + tokFull}
	rec := e.req(t, "GET", "/api/v1/alarms?state=active_unacked,rtn_unacked&priority=high", "", nil, bearer)
	if rec.Code != 200 {
		t.Fatalf("GET /alarms: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{`"id":"Line1/Tank/Level:High"`, `"display_path":"Tank 1 / High level"`, `"state":"active_unacked"`,
		`"shelved":null`, `"active_since":"2025-03-01T12:00:00Z"`, `"acked_at":null`, `"acked_by":null`, `"value":93.2`,
		`"quality":"Good"`, `"setpoint":90`, `"ack_level":"operate"`, `"shelve_level":"supervise"`, `"notes":[]`,
		`"unacked":1`, `"active":1`, `"highest":"high"`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /alarms lacks %s:\n%s", want, body)
		}
	}
	if fa.calls[0] != "list active_unacked,rtn_unacked high" {
		t.Errorf("filter %q", fa.calls[0])
	}
	rec = e.req(t, "GET", "/api/v1/alarms/journal?from=2025-03-01T00:00:00Z&limit=10&order=desc", "", nil, bearer)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"seq":7`) || !strings.Contains(rec.Body.String(), `"next":7`) ||
		!strings.Contains(rec.Body.String(), `"from":"normal","to":"active_unacked"`) {
		t.Errorf("journal: %d %s", rec.Code, rec.Body)
	}
	rec = e.req(t, "GET", "/api/v1/alarms/stats?window_h=24", "", nil, bearer)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"window_h":24`) || !strings.Contains(rec.Body.String(), `"rate_per_10min":2`) ||
		!strings.Contains(rec.Body.String(), `"top":[{"id":"Line1/Tank/Level:High","count":12}]`) || !strings.Contains(rec.Body.String(), `"stale":[]`) {
		t.Errorf("stats: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []string{"/api/v1/alarms?colour=red", "/api/v1/alarms/journal?limit=0", "/api/v1/alarms/stats?window_h=48",
		"/api/v1/alarms/journal?order=up", "/api/v1/alarms?include_normal=maybe"} {
		if rec := e.req(t, "GET", bad, "", nil, bearer); rec.Code != 400 {
			t.Errorf("%s: %d %s", bad, rec.Code, rec.Body)
		}
	}
	rec = e.req(t, "POST", "/api/v1/alarms/shelve", `{"ids":["Line1/Tank/Level:High"],"duration_s":3600}`, nil, bearer)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `{"results":[{"id":"Line1/Tank/Level:High","status":"Bad_UserAccessDenied","reason":"shelving this alarm needs write level \"supervise\""}]}`) {
		t.Errorf("shelve: %d %s", rec.Code, rec.Body)
	}
	if fa.calls[len(fa.calls)-1] != "shelve 1h0m0s" {
		t.Errorf("shelve call %q", fa.calls[len(fa.calls)-1])
	}
	if rec := e.req(t, "POST", "/api/v1/alarms/note", `{"id":"Line1/Tank/Level:High","text":"checked"}`, nil, bearer); rec.Code != 200 || rec.Body.String() != "{\"ok\":true}\n" {
		t.Errorf("note: %d %q", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/api/v1/alarms/ack", `{}`, nil, bearer); rec.Code != 400 {
		t.Errorf("ack without ids: %d", rec.Code)
	}
	if rec := e.req(t, "POST", "/api/v1/alarms/ack", `{"ids":["x"],"color":1}`, nil, bearer); rec.Code != 400 {
		t.Errorf("ack with an unknown key: %d", rec.Code)
	}
	if rec := e.req(t, "POST", "/api/v1/alarms/shelve", `{"ids":["x"],"duration_s":1e30}`, nil, bearer); rec.Code != 400 ||
		!strings.Contains(rec.Body.String(), "duration_s: 1e+30 is out of range") {
		t.Errorf("shelve for 1e30 s: %d %s, want 400 naming duration_s", rec.Code, rec.Body)
	}
	// A key without alarm:read is refused for the call.
	if rec := e.req(t, "GET", "/api/v1/alarms", "", nil, map[string]string{"Authorization": "Bearer " + tokReader}); rec.Code != 403 ||
		!strings.Contains(rec.Body.String(), `missing scope \"alarm:read\"`) {
		t.Errorf("reader: %d %s", rec.Code, rec.Body)
	}
}

func TestAlarmRoutes_LiveViewSessionLevels(t *testing.T) {
	e, fa := newAlarmEnv(t)
	// A view operator reads alarms but may not acknowledge: 403 for the
	// call, naming the scope.
	c, csrf := e.login(t, "viewer")
	if rec := e.req(t, "GET", "/api/v1/alarms", "", c, nil); rec.Code != 200 {
		t.Fatalf("viewer list: %d %s", rec.Code, rec.Body)
	}
	rec := e.req(t, "POST", "/api/v1/alarms/ack", `{"ids":["Line1/Tank/Level:High"]}`, c, map[string]string{CSRFHeader: csrf})
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), `missing scope \"alarm:ack\"`) {
		t.Fatalf("viewer ack: %d %s", rec.Code, rec.Body)
	}
	// An operator may; the service gets the session's grant and level.
	c, csrf = e.login(t, "op")
	if rec := e.req(t, "POST", "/api/v1/alarms/ack", `{"ids":["Line1/Tank/Level:High"]}`, c, nil); rec.Code != 403 {
		t.Fatalf("ack without the CSRF token: %d", rec.Code)
	}
	rec = e.req(t, "POST", "/api/v1/alarms/ack", `{"ids":["Line1/Tank/Level:High"]}`, c, map[string]string{CSRFHeader: csrf})
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"status":"Good"`) {
		t.Fatalf("operator ack: %d %s", rec.Code, rec.Body)
	}
	g := fa.grants[len(fa.grants)-1]
	if g.Principal != "op" || g.WriteLevel != auth.LevelOperate || !g.HasScope(auth.AlarmAck) {
		t.Errorf("grant %+v", g)
	}
}

func TestWS_AlarmMessages(t *testing.T) {
	e, fa := newAlarmEnv(t)
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	c, _ := e.login(t, "op")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {c.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	read := func() map[string]any {
		t.Helper()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m["type"] != "heartbeat" {
				return m
			}
		}
	}
	// A session gets the current alarms without asking, then the summary.
	m := read()
	if m["type"] != "alarm" || m["snapshot"] != true || m["alarm"].(map[string]any)["id"] != "Line1/Tank/Level:High" {
		t.Fatalf("first message %v", m)
	}
	if m := read(); m["type"] != "alarm_summary" || m["unacked"] != 1.0 || m["active"] != 1.0 || m["highest"] != "high" {
		t.Fatalf("summary %v", m)
	}
	// A transition: the alarm with what happened, then the summary, whose
	// highest is null when nothing is active.
	fa.none = true
	acked := fakeAlarm
	acked.State, acked.Acked, acked.AckedBy, acked.AckedAt = "active_acked", true, "op", testNow
	for fa.publish(gateway.AlarmEvent{Seq: 8, At: testNow, Event: "ack", From: "active_unacked", To: "active_acked", Cause: "acknowledged",
		By: "op", Alarm: acked}) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	m = read()
	al := m["alarm"].(map[string]any)
	if m["type"] != "alarm" || m["event"] != "ack" || m["from"] != "active_unacked" || m["to"] != "active_acked" || m["by"] != "op" ||
		m["seq"] != 8.0 || al["state"] != "active_acked" || al["acked_by"] != "op" || m["snapshot"] != nil {
		t.Fatalf("transition %v", m)
	}
	m = read()
	if h, ok := m["highest"]; m["type"] != "alarm_summary" || !ok || h != nil || m["unacked"] != 0.0 {
		t.Fatalf("summary after %v", m)
	}
}

func TestWS_BearerSubscribesToAlarms(t *testing.T) {
	e, fa := newAlarmEnv(t)
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(tok string) *websocket.Conn {
		ws, _, err := websocket.Dial(ctx, strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/ws", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	first := func(ws *websocket.Conn) string {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// Without alarm:read: an error message, the socket stays.
	ws := dial(tokReader)
	defer ws.CloseNow()
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe_alarms"}`))
	if got := first(ws); !strings.Contains(got, `"type":"error"`) || !strings.Contains(got, `missing scope \"alarm:read\" for alarm messages`) {
		t.Fatalf("reader: %s", got)
	}
	ws2 := dial(tokFull)
	defer ws2.CloseNow()
	ws2.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe_alarms"}`))
	if got := first(ws2); !strings.Contains(got, `"type":"alarm"`) || !strings.Contains(got, `"snapshot":true`) {
		t.Fatalf("full: %s", got)
	}
	if len(fa.subs) != 1 {
		t.Errorf("subscriptions %d, want 1 (the reader's was refused)", len(fa.subs))
	}
}
