package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

const alarmProject = `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Tank/Level, device: sim, address: memory, type: float64, scan: 20ms, units: "%"}
  - {path: Line2/Flow, device: sim, address: memory, type: float64, scan: 20ms}
alarms:
  - {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, deadband: 2, priority: high,
     message: "Tank level high: {value} {units}"}
  - {name: Hi, tag: Line2/Flow, mode: above, setpoint: 10, ack_level: supervise}
`

// startAlarms builds a service over alarmProject and starts its alarms,
// then the tag engine (the daemon's order), stopping both when t ends.
func startAlarms(t *testing.T, project string) *Service {
	t.Helper()
	dir := t.TempDir()
	s := newService(t, withProjectFile(t, testOptions(t, dir), dir, project))
	if err := s.alarms.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.alarms.Stop(context.Background()) })
	startEngine(t, s)
	return s
}

func writeTag(t *testing.T, s *Service, path string, v float64) {
	t.Helper()
	res, err := s.WriteTags(context.Background(), designer, []gateway.TagWrite{{Path: path, Value: v}})
	if err != nil || res[0].Quality != value.Good {
		t.Fatalf("write %s: %+v %v", path, res, err)
	}
}

// waitAlarm waits (at most 10 s) until alarm id is in state.
func waitAlarm(t *testing.T, s *Service, g auth.Grant, id, state string) gateway.Alarm {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := s.ListAlarms(context.Background(), g, gateway.AlarmFilter{IncludeNormal: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list.Alarms {
			if a.ID == id && a.State == state {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm %s never reached %s: %+v", id, state, list.Alarms)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alarmGrantAt(level auth.Level, scopes ...auth.Scope) auth.Grant {
	return auth.Grant{Principal: "op-" + level.String(), Realm: auth.RealmOperator, Origin: "rest", Scopes: scopes, WriteLevel: level}
}

func TestAlarms_ThroughTheService(t *testing.T) {
	s := startAlarms(t, alarmProject)
	ctx := context.Background()
	read := alarmGrantAt(auth.LevelView, auth.AlarmRead)
	writeTag(t, s, "Line1/Tank/Level", 93.2)
	a := waitAlarm(t, s, read, "Line1/Tank/Level:High", "active_unacked")
	if a.Message != "Tank level high: 93.2 %" || a.Priority != "high" || a.Setpoint == nil || *a.Setpoint != 90 || a.Units != "%" {
		t.Errorf("alarm %+v", a)
	}
	list, err := s.ListAlarms(ctx, read, gateway.AlarmFilter{})
	if err != nil || len(list.Alarms) != 1 || list.Unacked != 1 || list.Active != 1 || list.Highest != "high" {
		t.Fatalf("list %+v %v", list, err)
	}

	// A grant without alarm:ack is refused for the call.
	if _, err := s.AckAlarms(ctx, read, []string{a.ID}, false); !deniedFor(err, "alarm:ack") {
		t.Fatalf("ack without alarm:ack: %v", err)
	}
	// At view: refused per alarm, and audited.
	view := alarmGrantAt(auth.LevelView, auth.AlarmRead, auth.AlarmAck)
	res, err := s.AckAlarms(ctx, view, []string{a.ID}, false)
	if err != nil || res[0].Status != value.BadUserAccessDenied || !strings.Contains(res[0].Reason, `needs write level "operate"`) {
		t.Fatalf("ack at view: %+v %v", res, err)
	}
	// At operate: acknowledged.
	op := alarmGrantAt(auth.LevelOperate, auth.AlarmRead, auth.AlarmAck)
	if res, err := s.AckAlarms(ctx, op, []string{a.ID}, false); err != nil || res[0].Status != value.Good {
		t.Fatalf("ack at operate: %+v %v", res, err)
	}
	waitAlarm(t, s, read, a.ID, "active_acked")
	var acks []string
	for _, r := range auditRecords(t, s) {
		if r.Action == "alarm.ack" {
			acks = append(acks, r.Principal+" "+r.Target+" "+r.Result)
			if r.Result == "refused" && !strings.Contains(r.Detail, `needs write level "operate"`) {
				t.Errorf("refusal detail %q", r.Detail)
			}
		}
	}
	if strings.Join(acks, "; ") != "op-view Line1/Tank/Level:High refused; op-operate Line1/Tank/Level:High ok" {
		t.Errorf("audit of acks: %q", acks)
	}

	// Shelve needs supervise; the duration is bounded.
	sup := alarmGrantAt(auth.LevelSupervise, auth.AlarmRead, auth.AlarmAck)
	if _, err := s.ShelveAlarms(ctx, sup, []string{a.ID}, 48*time.Hour, false); !errors.Is(err, gateway.ErrInvalid) {
		t.Errorf("a 48 h shelve: %v", err)
	}
	if res, _ := s.ShelveAlarms(ctx, op, []string{a.ID}, time.Hour, false); res[0].Status != value.BadUserAccessDenied {
		t.Errorf("shelve at operate: %+v", res)
	}
	if res, err := s.ShelveAlarms(ctx, sup, []string{a.ID}, time.Hour, false); err != nil || res[0].Status != value.Good {
		t.Fatalf("shelve: %+v %v", res, err)
	}
	if err := s.AddAlarmNote(ctx, op, a.ID, "level sensor checked"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAlarmNote(ctx, op, "nope:X", "x"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("note on an unknown alarm: %v", err)
	}

	// The journal, newest first.
	page, err := s.AlarmJournal(ctx, read, gateway.AlarmJournalQuery{Path: "Line1", Desc: true, Limit: 2})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Event != "note" || page.Entries[1].Event != "shelve" || page.Next == 0 {
		t.Fatalf("journal %+v %v", page, err)
	}
	st, err := s.AlarmStats(ctx, read, time.Hour)
	if err != nil || st.Activations != 1 || st.Shelved != 1 || len(st.Top) != 1 {
		t.Errorf("stats %+v %v", st, err)
	}
	m := s.AlarmMetrics(ctx)
	if m.Alarms != 2 || m.Shelved != 1 || m.ActivationsTotal != 1 || m.JournalEntries < 4 {
		t.Errorf("metrics %+v", m)
	}
}

func deniedFor(err error, need string) bool {
	var de *auth.DeniedError
	return errors.As(err, &de) && de.Need == need
}

func TestAlarms_PrefixesLimitWhatAGrantSees(t *testing.T) {
	s := startAlarms(t, alarmProject)
	ctx := context.Background()
	line2 := alarmGrantAt(auth.LevelDesign, auth.AlarmRead, auth.AlarmAck)
	line2.Prefixes = []string{"Line2"}
	ch, _, cancel := s.SubscribeAlarms(line2, 16)
	defer cancel()
	writeTag(t, s, "Line1/Tank/Level", 95)
	writeTag(t, s, "Line2/Flow", 20)
	select {
	case ev := <-ch:
		if ev.Alarm.ID != "Line2/Flow:Hi" || ev.Event != "activate" || ev.Seq == 0 {
			t.Fatalf("first event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	waitAlarm(t, s, auth.Full("x", auth.RealmPlatform, "t"), "Line1/Tank/Level:High", "active_unacked")
	list, _ := s.ListAlarms(ctx, line2, gateway.AlarmFilter{})
	if len(list.Alarms) != 1 || list.Alarms[0].ID != "Line2/Flow:Hi" || list.Unacked != 1 {
		t.Errorf("list for Line2 %+v", list)
	}
	res, _ := s.AckAlarms(ctx, line2, nil, true)
	if len(res) != 1 || res[0].ID != "Line2/Flow:Hi" || res[0].Status != value.Good {
		t.Errorf("ack all for Line2: %+v", res)
	}
	if res, _ := s.AckAlarms(ctx, line2, []string{"Line1/Tank/Level:High"}, false); res[0].Status != value.BadUserAccessDenied {
		t.Errorf("ack outside the prefixes %+v", res)
	}
}

func TestAlarms_ScriptMethods(t *testing.T) {
	s := startAlarms(t, alarmProject)
	ctx := context.Background()
	writeTag(t, s, "Line1/Tank/Level", 95)
	waitAlarm(t, s, designer, "Line1/Tank/Level:High", "active_unacked")
	sv := sandboxServices{s}
	script := auth.Grant{Principal: "apikey:k", Realm: auth.RealmAPIKey, Origin: "script:m.e",
		Scopes: []auth.Scope{auth.AlarmRead, auth.AlarmAck}, WriteLevel: auth.LevelOperate}
	out, err := sv.Call(ctx, script, "alarm.queryStatus", json.RawMessage(`{"priority": "high"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) != 1 || rows[0]["state"] != "active_unacked" ||
		rows[0]["active_since"].(map[string]any)["$dt"] == nil || rows[0]["value"] != 95.0 {
		t.Fatalf("queryStatus %s %v", out, err)
	}
	out, err = sv.Call(ctx, script, "alarm.acknowledge", json.RawMessage(`{"ids": ["Line1/Tank/Level:High", "Line2/Flow:Hi"]}`))
	if err != nil || !strings.Contains(string(out), `{"id":"Line1/Tank/Level:High","status":"Good"}`) ||
		!strings.Contains(string(out), `"id":"Line2/Flow:Hi","reason":"acknowledging this alarm needs write level \"supervise\"`) {
		t.Fatalf("acknowledge %s %v", out, err)
	}
	if _, err := sv.Call(ctx, script, "alarm.shelve", json.RawMessage(`{"ids": ["Line1/Tank/Level:High"]}`)); !errors.Is(err, gateway.ErrInvalid) {
		t.Errorf("shelve without seconds: %v", err)
	}
	if _, err := sv.Call(ctx, script, "alarm.addNote", json.RawMessage(`{"id": "Line1/Tank/Level:High", "text": "ok"}`)); err != nil {
		t.Fatal(err)
	}
	out, err = sv.Call(ctx, script, "alarm.queryJournal", json.RawMessage(`{"path": "Line1/Tank/Level:High", "limit": 10}`))
	if err != nil || !strings.Contains(string(out), `"event":"note"`) || !strings.Contains(string(out), `"next":null`) {
		t.Fatalf("queryJournal %s %v", out, err)
	}
	var auditedBy []string
	for _, r := range auditRecords(t, s) {
		if strings.HasPrefix(r.Action, "alarm.") {
			auditedBy = append(auditedBy, r.Action+" "+r.Script+" "+r.Result)
		}
	}
	if strings.Join(auditedBy, "; ") != "alarm.ack m.e partial; alarm.shelve m.e invalid; alarm.note m.e ok" {
		t.Errorf("audit %q", auditedBy)
	}
}

func TestAlarms_CheckProjectNamesFileAndLine(t *testing.T) {
	p, err := config.ParseProject([]byte(`devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Run, device: sim, address: memory, type: bool}
  - {path: Line1/Level, device: sim, address: memory}
alarms:
  - {name: Stopped, tag: Line1/Run, mode: state, state: false, deadband: 1}
  - {name: High, tag: Line1/Level, mode: above, setpoint: {tag: Line1/SP}}
  - name: Slow
    tag: Line1/Level
    mode: below
    setpoint: 1
    clear_delay: -2s
`))
	if err != nil {
		t.Fatal(err)
	}
	p.File = "/etc/qubiq/project.yaml"
	err = CheckProject(p, nil, quiet)
	for _, want := range []string{
		`/etc/qubiq/project.yaml:7: alarm "Stopped": a deadband applies to numeric limits`,
		`/etc/qubiq/project.yaml:8: alarm "High": unknown setpoint tag "Line1/SP"`,
		`/etc/qubiq/project.yaml:13: alarm "Slow": clear_delay: -2s is below zero`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check: %v\nwant %q", err, want)
		}
	}
}

func TestAlarms_ProjectImportAppliesThemAtOnce(t *testing.T) {
	s := startAlarms(t, alarmProject)
	ctx := context.Background()
	writeTag(t, s, "Line1/Tank/Level", 95)
	waitAlarm(t, s, designer, "Line1/Tank/Level:High", "active_unacked")
	next := strings.Replace(alarmProject, "setpoint: 90, deadband: 2", "setpoint: 99, deadband: 2", 1)
	next = strings.Replace(next, "  - {name: Hi, tag: Line2/Flow, mode: above, setpoint: 10, ack_level: supervise}\n",
		"  - {name: Lo, tag: Line2/Flow, mode: below, setpoint: 5}\n", 1)
	if _, err := s.ImportProject(ctx, designer, []byte(next)); err != nil {
		t.Fatal(err)
	}
	// The same alarm keeps its state, re-evaluated with the new setpoint:
	// 95 is not above 99 any more.
	waitAlarm(t, s, designer, "Line1/Tank/Level:High", "rtn_unacked")
	list, _ := s.ListAlarms(ctx, designer, gateway.AlarmFilter{IncludeNormal: true})
	var ids []string
	for _, a := range list.Alarms {
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, " ") != "Line1/Tank/Level:High Line2/Flow:Lo" && strings.Join(ids, " ") != "Line2/Flow:Lo Line1/Tank/Level:High" {
		t.Errorf("alarms after import %v", ids)
	}
	bad := strings.Replace(alarmProject, "mode: above, setpoint: 90", "mode: above, setpoint: {tag: Nope/Tag}", 1)
	var pe *gateway.ProjectError
	if _, err := s.ImportProject(ctx, designer, []byte(bad)); !errors.As(err, &pe) || !strings.Contains(err.Error(), `unknown setpoint tag "Nope/Tag"`) {
		t.Errorf("bad import: %v", err)
	}
}
