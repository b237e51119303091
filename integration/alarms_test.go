//go:build integration

package integration

import (
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goburrow/modbus"

	"qubiq.dev/edge/internal/peers"
)

// The alarm tests (issue 16, Proof): a pymodbus register drives the
// alarms of a real qubiqd; the test changes the register with its own
// Modbus client, as the plant would.

const scanMs = 100

func alarmProject(port int) string {
	return fmt.Sprintf(`devices:
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 1s}
tags:
  - {path: Plant/Tank/Level, device: plc1, address: HR0, type: int16, scan: %dms, units: "%%"}
  - {path: Plant/Valve/Open, device: plc1, address: HR1, type: int16, scan: %dms}
alarms:
  - {name: High, tag: Plant/Tank/Level, mode: above, setpoint: 90, deadband: 5, active_delay: 2s, priority: high,
     message: "Tank level high: {value} {units}"}
  - {name: Chatter, tag: Plant/Valve/Open, mode: state, priority: low, chattering: {count: 3, window: 6s}}
`, port, scanMs, scanMs)
}

// plant is the test's own Modbus client of the pymodbus server.
type plant struct {
	t *testing.T
	h *modbus.TCPClientHandler
	c modbus.Client
}

func newPlant(t *testing.T, port int) *plant {
	t.Helper()
	h := modbus.NewTCPClientHandler(fmt.Sprintf("127.0.0.1:%d", port))
	h.SlaveId, h.Timeout = 1, 3*time.Second
	if err := h.Connect(); err != nil {
		t.Fatalf("plant client: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return &plant{t: t, h: h, c: modbus.NewClient(h)}
}

// set writes holding register addr and returns when it was written.
func (p *plant) set(addr, v uint16) time.Time {
	p.t.Helper()
	if _, err := p.c.WriteSingleRegister(addr, v); err != nil {
		p.t.Fatalf("write HR%d = %d: %v", addr, v, err)
	}
	return time.Now()
}

func startAlarmDaemon(t *testing.T) (*daemon, *plant) {
	t.Helper()
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 50, 1: 0}}})
	d := newDaemon(t, alarmProject(mb.Port))
	d.start()
	return d, newPlant(t, mb.Port)
}

type alarmJSON struct {
	ID          string     `json:"id"`
	State       string     `json:"state"`
	Active      bool       `json:"active"`
	Acked       bool       `json:"acked"`
	Chattering  bool       `json:"chattering"`
	Evaluable   bool       `json:"evaluable"`
	Reason      string     `json:"reason"`
	Message     string     `json:"message"`
	Quality     string     `json:"quality"`
	ActiveSince *time.Time `json:"active_since"`
	AckedBy     *string    `json:"acked_by"`
}

type entryJSON struct {
	Seq   uint64    `json:"seq"`
	At    time.Time `json:"at"`
	ID    string    `json:"id"`
	Event string    `json:"event"`
	From  string    `json:"from"`
	To    string    `json:"to"`
	By    string    `json:"by"`
	Cause string    `json:"cause"`
}

// alarm returns one alarm (include_normal) over REST.
func (d *daemon) alarm(token, id string) alarmJSON {
	d.t.Helper()
	var out struct {
		Alarms []alarmJSON `json:"alarms"`
	}
	if st, body := d.call("GET", "/api/v1/alarms?include_normal=true", token, nil, &out); st != 200 {
		d.t.Fatalf("GET /alarms: %d %s", st, body)
	}
	for _, a := range out.Alarms {
		if a.ID == id {
			return a
		}
	}
	d.t.Fatalf("no alarm %s", id)
	return alarmJSON{}
}

// waitAlarm waits until alarm id satisfies cond.
func (d *daemon) waitAlarm(token, id, what string, cond func(alarmJSON) bool) alarmJSON {
	d.t.Helper()
	var a alarmJSON
	waitFor(d.t, 15*time.Second, id+" "+what, func() (bool, string) {
		a = d.alarm(token, id)
		return cond(a), fmt.Sprintf("%+v", a)
	})
	return a
}

func (d *daemon) journal(token string, q url.Values) []entryJSON {
	d.t.Helper()
	var out struct {
		Entries []entryJSON `json:"entries"`
	}
	if st, body := d.call("GET", "/api/v1/alarms/journal?"+q.Encode(), token, nil, &out); st != 200 {
		d.t.Fatalf("journal: %d %s", st, body)
	}
	return out.Entries
}

// TestAlarms_ModbusHighSetpointDeadbandAndDelay: the register crosses the
// high setpoint and stays above it; with a 2 s active delay the alarm
// activates exactly once, 2 s (and at most a scan and a margin) after the
// register changed; wandering inside the deadband does not clear it nor
// activate it again; below setpoint − deadband it returns to normal.
func TestAlarms_ModbusHighSetpointDeadbandAndDelay(t *testing.T) {
	d, p := startAlarmDaemon(t)
	reader := d.apiKey("reader", []string{"alarm:read"}, "view")
	const id = "Plant/Tank/Level:High"
	d.waitAlarm(reader, id, "evaluable and normal", func(a alarmJSON) bool { return a.Evaluable && a.State == "normal" })

	crossed := p.set(0, 95)
	time.Sleep(1500 * time.Millisecond)
	if a := d.alarm(reader, id); a.Active {
		t.Fatalf("active after 1.5 s of a 2 s delay: %+v", a)
	}
	a := d.waitAlarm(reader, id, "active", func(a alarmJSON) bool { return a.State == "active_unacked" })
	if a.Message != "Tank level high: 95 %" {
		t.Errorf("message %q", a.Message)
	}
	lag := a.ActiveSince.Sub(crossed)
	if lag < 2*time.Second || lag > 2*time.Second+scanMs*time.Millisecond+time.Second {
		t.Errorf("activated %s after the register crossed; want 2 s (+ at most a scan and a margin)", lag)
	}
	// Inside the deadband (85, 90]: still active, no second activation.
	for _, v := range []uint16{89, 86, 92, 87} {
		p.set(0, v)
		time.Sleep(3 * scanMs * time.Millisecond)
		if a := d.alarm(reader, id); a.State != "active_unacked" {
			t.Fatalf("at %d (in the deadband): %s", v, a.State)
		}
	}
	p.set(0, 84)
	d.waitAlarm(reader, id, "returned to normal", func(a alarmJSON) bool { return a.State == "rtn_unacked" })

	es := d.journal(reader, url.Values{"path": {id}})
	var evs []string
	for _, e := range es {
		evs = append(evs, e.Event+" "+e.To)
	}
	if strings.Join(evs, ", ") != "activate active_unacked, clear rtn_unacked" {
		t.Fatalf("journal %v; want exactly one activation, then the clear", evs)
	}
	if !es[0].At.Equal(*a.ActiveSince) {
		t.Errorf("journal activation at %v, alarm active since %v", es[0].At, a.ActiveSince)
	}
}

// TestAlarms_AcknowledgeNeedsTheLevel: an operator at view cannot
// acknowledge (an API key: refused per alarm; a LiveView session: 403 for
// the call; both audited), one at operate can (REST and qubiqctl).
func TestAlarms_AcknowledgeNeedsTheLevel(t *testing.T) {
	d, p := startAlarmDaemon(t)
	const id = "Plant/Tank/Level:High"
	viewKey := d.apiKey("viewer", []string{"alarm:read", "alarm:ack"}, "view")
	opKey := d.apiKey("operator", []string{"alarm:read", "alarm:ack"}, "operate")
	p.set(0, 99)
	d.waitAlarm(viewKey, id, "active", func(a alarmJSON) bool { return a.State == "active_unacked" })

	var res struct {
		Results []struct{ ID, Status, Reason string } `json:"results"`
	}
	if st, body := d.call("POST", "/api/v1/alarms/ack", viewKey, map[string]any{"ids": []string{id}}, &res); st != 200 ||
		res.Results[0].Status != "Bad_UserAccessDenied" || !strings.Contains(res.Results[0].Reason, `needs write level "operate"`) {
		t.Fatalf("ack at view: %d %s", st, body)
	}
	d.qubiqctl(d.token, "users", "add", "--name", "vic", "--realm", "operator", "--level", "view", "--password-file", writeTemp(t, e2ePassword))
	s, st := d.login("vic", e2ePassword)
	if st != 200 {
		t.Fatalf("login: %d", st)
	}
	if st, body := s.do("POST", "/api/v1/alarms/ack", "application/json", `{"ids":["`+id+`"]}`, map[string]string{"X-CSRF-Token": s.csrf}); st != 403 ||
		!strings.Contains(body, `missing scope \"alarm:ack\"`) {
		t.Fatalf("ack by a view session: %d %s", st, body)
	}
	if a := d.alarm(viewKey, id); a.State != "active_unacked" {
		t.Fatalf("after the refusals: %s", a.State)
	}
	// qubiqctl at view exits 1 naming the level; at operate it acknowledges.
	if code, out, errOut := d.ctl(viewKey, "alarms", "ack", id); code != 1 || !strings.Contains(out, `needs write level "operate"`) {
		t.Fatalf("qubiqctl ack at view: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := d.ctl(opKey, "alarms", "ack", id); code != 0 {
		t.Fatalf("qubiqctl ack at operate: %d\n%s%s", code, out, errOut)
	}
	a := d.waitAlarm(viewKey, id, "acknowledged", func(a alarmJSON) bool { return a.State == "active_acked" })
	if a.AckedBy == nil || *a.AckedBy != "apikey:operator" {
		t.Errorf("acked by %v", a.AckedBy)
	}
	var recs []struct {
		Principal string `json:"principal"`
		Action    string `json:"action"`
		Target    string `json:"target"`
		Result    string `json:"result"`
		Detail    string `json:"detail"`
	}
	waitFor(t, 5*time.Second, "the audit records", func() (bool, string) {
		recs = recs[:0]
		d.call("GET", "/api/v1/audit?limit=1000", d.token, nil, &recs)
		n := 0
		for _, r := range recs {
			if r.Action == "alarm.ack" || (r.Action == "refused" && strings.Contains(r.Target, "/alarms/ack")) {
				n++
			}
		}
		return n >= 4, fmt.Sprintf("%+v", recs)
	})
	var got []string
	for _, r := range recs {
		switch {
		case r.Action == "alarm.ack":
			got = append(got, r.Result)
		case r.Action == "refused" && strings.Contains(r.Target, "/alarms/ack"):
			got = append(got, "route refused "+r.Principal)
		}
	}
	if strings.Join(got, ", ") != "refused, route refused vic, refused, ok" {
		t.Errorf("audit of the acknowledgements: %v", got)
	}
}

// TestAlarms_ActiveUnackedSurvivesKill9: qubiqd killed with SIGKILL while
// an alarm is active and unacknowledged; after the restart it is still
// active and unacknowledged, re-evaluated against the first fresh value
// (still above: the same activation; then below: returned to normal).
func TestAlarms_ActiveUnackedSurvivesKill9(t *testing.T) {
	d, p := startAlarmDaemon(t)
	const id = "Plant/Tank/Level:High"
	reader := d.apiKey("reader", []string{"alarm:read"}, "view")
	p.set(0, 97)
	before := d.waitAlarm(reader, id, "active", func(a alarmJSON) bool { return a.State == "active_unacked" })
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exitErr
	d.cmd = nil
	d.start()
	after := d.waitAlarm(reader, id, "re-evaluated", func(a alarmJSON) bool { return a.Evaluable })
	if after.State != "active_unacked" || !after.ActiveSince.Equal(*before.ActiveSince) {
		t.Fatalf("after kill -9: %+v (before: %+v)", after, before)
	}
	es := d.journal(reader, url.Values{"path": {id}, "state": {"active_unacked"}})
	if len(es) != 1 {
		t.Errorf("activations in the journal after the restart: %d, want 1", len(es))
	}
	p.set(0, 10)
	d.waitAlarm(reader, id, "returned to normal", func(a alarmJSON) bool { return a.State == "rtn_unacked" })
}

// TestAlarms_ToggledRegisterChatters: a register toggled 10 times within
// the chattering window (the rule scaled by 10: 3 activations in 6 s
// instead of 60 s) flags the alarm chattering, in the alarm and in the
// statistics.
func TestAlarms_ToggledRegisterChatters(t *testing.T) {
	d, p := startAlarmDaemon(t)
	const id = "Plant/Valve/Open:Chatter"
	reader := d.apiKey("reader", []string{"alarm:read"}, "view")
	d.waitAlarm(reader, id, "evaluable", func(a alarmJSON) bool { return a.Evaluable })
	for i := range 10 {
		p.set(1, uint16((i+1)%2)) // 1, 0, 1, 0, ...: five activations
		time.Sleep(3 * scanMs * time.Millisecond)
	}
	d.waitAlarm(reader, id, "chattering", func(a alarmJSON) bool { return a.Chattering })
	var st struct {
		Chattering []string `json:"chattering"`
		Top        []struct {
			ID    string `json:"id"`
			Count int    `json:"count"`
		} `json:"top"`
	}
	if code, body := d.call("GET", "/api/v1/alarms/stats", reader, nil, &st); code != 200 || len(st.Chattering) != 1 || st.Chattering[0] != id ||
		len(st.Top) == 0 || st.Top[0].ID != id || st.Top[0].Count != 5 {
		t.Fatalf("stats: %d %s", code, body)
	}
	es := d.journal(reader, url.Values{"path": {id}})
	n := 0
	for _, e := range es {
		if e.Event == "chattering" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("chattering entries %d, want 1", n)
	}
}
