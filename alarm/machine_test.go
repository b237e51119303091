package alarm

import (
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

const hiID = "Line1/Tank/Level:High"

func TestAbove_DeadbandCrossingDoesNotClear(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, deadband: 2, priority: high}\n")
	h.set("Line1/Tank/Level", 50.0)
	h.wantState(hiID, Normal)
	h.set("Line1/Tank/Level", 90.0) // at the setpoint: not above it
	h.wantState(hiID, Normal)
	h.set("Line1/Tank/Level", 93.2)
	a := h.wantState(hiID, ActiveUnacked)
	if !a.ActiveSince.Equal(t0) || a.Message != "Line1/Tank/Level:High: above 90 %: 93.2 %" {
		t.Errorf("active since %v, message %q", a.ActiveSince, a.Message)
	}
	for _, v := range []float64{89.9, 88.5, 88.01, 90} { // inside the deadband (88, 90]: still active
		h.set("Line1/Tank/Level", v)
		h.wantState(hiID, ActiveUnacked)
	}
	h.set("Line1/Tank/Level", 88.0) // setpoint − deadband: cleared
	h.wantState(hiID, RTNUnacked)
	h.wantEvents(hiID, "activate normal→active_unacked", "clear active_unacked→rtn_unacked")
}

func TestAbove_PercentDeadband(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 80, deadband: {percent: 5}}\n")
	h.set("Line1/Tank/Level", 81.0)
	h.wantState(hiID, ActiveUnacked)
	h.set("Line1/Tank/Level", 76.5) // 80 − 4 = 76: in the band
	h.wantState(hiID, ActiveUnacked)
	h.set("Line1/Tank/Level", 75.9)
	h.wantState(hiID, RTNUnacked)
}

func TestActiveDelay_ToTheTick(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, deadband: 2, active_delay: 2s}\n")
	h.set("Line1/Tank/Level", 95.0)
	h.wantState(hiID, Normal)
	h.at(2*time.Second - time.Nanosecond)
	h.wantState(hiID, Normal)
	h.at(2 * time.Second)
	a := h.wantState(hiID, ActiveUnacked)
	if !a.ActiveSince.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("active since %v, want t0+2s", a.ActiveSince)
	}
	h.wantEvents(hiID, "activate normal→active_unacked")

	// A dip below the setpoint during the delay restarts it: the trigger
	// must hold for the whole delay.
	h2 := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, deadband: 2, active_delay: 2s}\n")
	h2.set("Line1/Tank/Level", 95.0)
	h2.now = t0.Add(1500 * time.Millisecond)
	h2.set("Line1/Tank/Level", 89.0) // in the deadband, but not above: the delay restarts
	h2.now = t0.Add(1700 * time.Millisecond)
	h2.set("Line1/Tank/Level", 96.0)
	h2.at(3700*time.Millisecond - time.Nanosecond)
	h2.wantState(hiID, Normal)
	h2.at(3700 * time.Millisecond)
	if a := h2.wantState(hiID, ActiveUnacked); !a.ActiveSince.Equal(t0.Add(3700 * time.Millisecond)) {
		t.Errorf("restarted delay: active since %v, want t0+3.7s", a.ActiveSince)
	}
}

func TestClearDelay_ToTheTick(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, deadband: 2, clear_delay: 1s}\n")
	h.set("Line1/Tank/Level", 95.0)
	h.wantState(hiID, ActiveUnacked)
	h.now = t0.Add(10 * time.Second)
	h.set("Line1/Tank/Level", 80.0)
	h.at(11*time.Second - time.Nanosecond)
	h.wantState(hiID, ActiveUnacked)
	h.at(11 * time.Second)
	h.wantState(hiID, RTNUnacked)
	if a := h.alarm(hiID); !a.LastChange.Equal(t0.Add(11 * time.Second)) {
		t.Errorf("cleared at %v, want t0+11s", a.LastChange)
	}
	// Back into the deadband during the clear delay restarts it.
	h.set("Line1/Tank/Level", 95.0)
	h.wantState(hiID, ActiveUnacked)
	h.now = t0.Add(20 * time.Second)
	h.set("Line1/Tank/Level", 80.0)
	h.now = t0.Add(20500 * time.Millisecond)
	h.set("Line1/Tank/Level", 89.0) // in the deadband: not cleared
	h.at(25 * time.Second)
	h.wantState(hiID, ActiveUnacked)
}

func TestAck_BeforeAndAfterReturnToNormal(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	// Acknowledged while active, then it clears: normal.
	h.set("Line1/Tank/Level", 95.0)
	res := h.ack(operator, hiID)
	if res[0].Status != value.Good || res[0].Reason != "" {
		t.Fatalf("ack: %+v", res)
	}
	a := h.wantState(hiID, ActiveAcked)
	if a.AckedBy != "ann" || !a.AckedAt.Equal(t0) {
		t.Errorf("acked by %q at %v", a.AckedBy, a.AckedAt)
	}
	h.set("Line1/Tank/Level", 80.0)
	h.wantState(hiID, Normal)
	// Returns to normal first, then acknowledged: normal.
	h.set("Line1/Tank/Level", 95.0)
	h.wantState(hiID, ActiveUnacked)
	h.set("Line1/Tank/Level", 80.0)
	h.wantState(hiID, RTNUnacked)
	h.ack(operator, hiID)
	h.wantState(hiID, Normal)
	// A second acknowledgement has nothing to do.
	if res := h.ack(operator, hiID); res[0].Status != value.Good || !strings.Contains(res[0].Reason, "nothing to acknowledge") {
		t.Errorf("second ack: %+v", res)
	}
	h.wantEvents(hiID, "activate normal→active_unacked", "ack active_unacked→active_acked", "clear active_acked→normal",
		"activate normal→active_unacked", "clear active_unacked→rtn_unacked", "ack rtn_unacked→normal")
}

func TestAckModes_AutoAndNone(t *testing.T) {
	h := newHarness(t, `- {name: Auto, tag: Line1/Tank/Level, mode: above, setpoint: 90, ack_mode: auto}
- {name: None, tag: Line1/Tank/Level, mode: above, setpoint: 90, ack_mode: none}
`)
	h.set("Line1/Tank/Level", 95.0)
	h.wantState("Line1/Tank/Level:Auto", ActiveUnacked)
	h.wantState("Line1/Tank/Level:None", ActiveAcked)
	h.set("Line1/Tank/Level", 80.0)
	h.wantState("Line1/Tank/Level:Auto", Normal)
	h.wantState("Line1/Tank/Level:None", Normal)
}

func TestLatching(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, latching: true}\n")
	h.set("Line1/Tank/Level", 95.0)
	h.set("Line1/Tank/Level", 80.0)
	a := h.wantState(hiID, ActiveUnacked) // latched: still active
	if !a.Latched || !a.Active {
		t.Fatalf("latched %v active %v", a.Latched, a.Active)
	}
	h.set("Line1/Tank/Level", 95.0) // the condition is back: active, no longer latched
	if a := h.wantState(hiID, ActiveUnacked); a.Latched {
		t.Error("still latched with the condition present")
	}
	h.set("Line1/Tank/Level", 70.0)
	h.ack(operator, hiID) // the acknowledgement resets it
	h.wantState(hiID, Normal)
	h.wantEvents(hiID, "activate normal→active_unacked", "latch active_unacked→active_unacked",
		"latch active_unacked→active_unacked", "ack active_unacked→normal")
	// Acknowledged while the condition holds: it clears when the condition does.
	h.set("Line1/Tank/Level", 95.0)
	h.ack(operator, hiID)
	h.set("Line1/Tank/Level", 80.0)
	h.wantState(hiID, Normal)
}

func TestShelve_ExpiryAndOneShot(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	h.set("Line1/Tank/Level", 95.0)
	if res, err := h.e.Shelve(operator, []string{hiID}, time.Hour, false); err != nil || res[0].Status != value.BadUserAccessDenied ||
		!strings.Contains(res[0].Reason, `needs write level "supervise"`) {
		t.Fatalf("shelve at operate: %+v %v", res, err)
	}
	if _, err := h.e.Shelve(supervisor, []string{hiID}, 25*time.Hour, false); err == nil || !strings.Contains(err.Error(), "maximum shelve of 24h0m0s") {
		t.Fatalf("shelve for 25h: %v", err)
	}
	if _, err := h.e.Shelve(supervisor, []string{hiID}, 0, false); err == nil || !strings.Contains(err.Error(), "never forever") {
		t.Fatalf("shelve without a duration: %v", err)
	}
	if res, err := h.e.Shelve(supervisor, []string{hiID}, time.Hour, false); err != nil || res[0].Status != value.Good {
		t.Fatalf("shelve: %+v %v", res, err)
	}
	a := h.alarm(hiID)
	if a.Shelf == nil || a.Shelf.By != "sue" || !a.Shelf.Until.Equal(t0.Add(time.Hour)) || a.Annunciated() {
		t.Fatalf("shelf %+v", a.Shelf)
	}
	if s := h.e.Summary(nil); s.Unacked != 0 || s.Active != 0 {
		t.Errorf("a shelved alarm counts in the summary: %+v", s)
	}
	if list, _ := h.e.List(Filter{}); len(list) != 1 {
		t.Errorf("the default list lacks the shelved alarm: %d", len(list))
	}
	h.at(time.Hour - time.Nanosecond)
	if h.alarm(hiID).Shelf == nil {
		t.Fatal("unshelved early")
	}
	h.at(time.Hour)
	a = h.wantState(hiID, ActiveUnacked) // still active: annunciated anew
	if a.Shelf != nil {
		t.Fatal("not unshelved at expiry")
	}
	h.wantEvents(hiID, "activate normal→active_unacked", "shelve active_unacked→shelved", "unshelve shelved→active_unacked")
	if tr := h.log[len(h.log)-1]; tr.Cause != "shelve expired" || !tr.At.Equal(t0.Add(time.Hour)) {
		t.Errorf("unshelve cause %q at %v", tr.Cause, tr.At)
	}
	// One-shot: ends when the alarm returns to normal.
	if _, err := h.e.Shelve(supervisor, []string{hiID}, 0, true); err != nil {
		t.Fatal(err)
	}
	if a := h.alarm(hiID); !a.Shelf.OneShot || !a.Shelf.Until.Equal(h.now.Add(24*time.Hour)) {
		t.Errorf("one-shot shelf %+v", a.Shelf)
	}
	h.set("Line1/Tank/Level", 80.0)
	if a := h.wantState(hiID, Normal); a.Shelf != nil {
		t.Error("one-shot shelve did not end on return to normal")
	}
	// Unshelve by an operator.
	h.set("Line1/Tank/Level", 95.0)
	h.e.Shelve(supervisor, []string{hiID}, time.Minute, false)
	if res, _ := h.e.Unshelve(supervisor, []string{hiID}); res[0].Status != value.Good {
		t.Fatalf("unshelve %+v", res)
	}
	h.wantState(hiID, ActiveUnacked)
}

func TestSuppressionByDesign(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, suppressed_by: Line1/Unit/Stopped}\n")
	h.set("Line1/Unit/Stopped", true)
	h.set("Line1/Tank/Level", 95.0)
	a := h.alarm(hiID)
	if !a.Suppressed || !a.Active || a.Annunciated() || a.State != ActiveAcked {
		t.Fatalf("suppressed alarm: %+v", a)
	}
	if s := h.e.Summary(nil); s.Active != 0 || s.Unacked != 0 {
		t.Errorf("suppressed alarm in the summary: %+v", s)
	}
	if list, _ := h.e.List(Filter{}); len(list) != 0 {
		t.Errorf("suppressed alarm in the default list")
	}
	h.set("Line1/Unit/Stopped", false)
	h.wantState(hiID, ActiveUnacked)
	h.wantEvents(hiID, "suppress normal→suppressed", "activate_unannunciated normal→active_acked", "unsuppress suppressed→active_unacked")
	// A condition tag that goes Bad does not suppress (fail safe).
	h.set("Line1/Unit/Stopped", true)
	h.setQ("Line1/Unit/Stopped", nil, value.BadCommunicationError)
	if a := h.alarm(hiID); a.Suppressed {
		t.Error("a Bad condition tag suppresses")
	}
}

func TestBadSource_NotEvaluableDoesNotClear(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	h.set("Line1/Tank/Level", 95.0)
	h.e.Apply([]Change{{Path: "Line1/Tank/Level", VQT: value.VQT{Value: 95.0, Quality: value.BadCommunicationError, Reason: "connection refused", Time: h.now}}})
	a := h.wantState(hiID, ActiveUnacked)
	if a.Evaluable || a.Reason != "Line1/Tank/Level is Bad_CommunicationError: connection refused" || a.Quality != value.BadCommunicationError {
		t.Fatalf("evaluable %v reason %q quality %s", a.Evaluable, a.Reason, a.Quality)
	}
	h.at(time.Hour)
	h.wantState(hiID, ActiveUnacked)
	h.set("Line1/Tank/Level", 50.0)
	h.wantState(hiID, RTNUnacked)
	h.wantEvents(hiID, "activate normal→active_unacked", "not_evaluable active_unacked→active_unacked",
		"evaluable active_unacked→active_unacked", "clear active_unacked→rtn_unacked")
}

func TestSetpointTag(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: {tag: Line1/Tank/HighSP}}\n")
	h.set("Line1/Tank/Level", 80.0)
	if a := h.alarm(hiID); a.Evaluable || !strings.Contains(a.Reason, "setpoint tag Line1/Tank/HighSP") {
		t.Fatalf("without a setpoint: evaluable %v %q", a.Evaluable, a.Reason)
	}
	h.set("Line1/Tank/HighSP", 90.0)
	h.wantState(hiID, Normal)
	h.set("Line1/Tank/HighSP", 70.0) // the setpoint moves below the value
	a := h.wantState(hiID, ActiveUnacked)
	if a.Setpoint == nil || *a.Setpoint != 70 {
		t.Errorf("setpoint %v", a.Setpoint)
	}
	h.setQ("Line1/Tank/HighSP", nil, value.BadTimeout)
	if a := h.wantState(hiID, ActiveUnacked); a.Evaluable {
		t.Error("evaluable with a Bad setpoint tag")
	}
}

func TestModes(t *testing.T) {
	type step struct {
		path string
		v    value.Value
		want State
	}
	tests := []struct {
		name, def, id string
		steps         []step
	}{
		{"below", "{name: Low, tag: Line1/Tank/Level, mode: below, setpoint: 10, deadband: 1}", "Line1/Tank/Level:Low",
			[]step{{"Line1/Tank/Level", 10.0, Normal}, {"Line1/Tank/Level", 9.5, ActiveUnacked}, {"Line1/Tank/Level", 10.9, ActiveUnacked}, {"Line1/Tank/Level", 11.0, RTNUnacked}}},
		{"between", "{name: Band, tag: Line1/Tank/Temp, mode: between, low: 40, high: 60, deadband: 2}", "Line1/Tank/Temp:Band",
			[]step{{"Line1/Tank/Temp", 39.0, Normal}, {"Line1/Tank/Temp", 40.0, ActiveUnacked}, {"Line1/Tank/Temp", 61.0, ActiveUnacked}, {"Line1/Tank/Temp", 62.5, RTNUnacked}}},
		{"outside", "{name: Out, tag: Line1/Tank/Temp, mode: outside, low: 40, high: 60, deadband: 2}", "Line1/Tank/Temp:Out",
			[]step{{"Line1/Tank/Temp", 50.0, Normal}, {"Line1/Tank/Temp", 61.0, ActiveUnacked}, {"Line1/Tank/Temp", 59.0, ActiveUnacked}, {"Line1/Tank/Temp", 57.5, RTNUnacked},
				{"Line1/Tank/Temp", 39.0, ActiveUnacked}}},
		{"state bool", "{name: Stopped, tag: Line1/Pump/Running, mode: state, state: false}", "Line1/Pump/Running:Stopped",
			[]step{{"Line1/Pump/Running", true, Normal}, {"Line1/Pump/Running", false, ActiveUnacked}, {"Line1/Pump/Running", true, RTNUnacked}}},
		{"state bit", "{name: Fault, tag: Line1/Pump/Status, mode: state, bit: 3}", "Line1/Pump/Status:Fault",
			[]step{{"Line1/Pump/Status", uint64(0b0111), Normal}, {"Line1/Pump/Status", uint64(0b1000), ActiveUnacked}, {"Line1/Pump/Status", uint64(0b0001), RTNUnacked}}},
		{"equals", "{name: Manual, tag: Line1/Pump/Mode, mode: equals, equals: 3}", "Line1/Pump/Mode:Manual",
			[]step{{"Line1/Pump/Mode", int64(2), Normal}, {"Line1/Pump/Mode", int64(3), ActiveUnacked}, {"Line1/Pump/Mode", int64(1), RTNUnacked}}},
		{"equals string", "{name: Err, tag: Line1/Name, mode: equals, equals: ERROR}", "Line1/Name:Err",
			[]step{{"Line1/Name", "OK", Normal}, {"Line1/Name", "ERROR", ActiveUnacked}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, "- "+tt.def+"\n")
			for i, s := range tt.steps {
				h.set(s.path, s.v)
				if a := h.alarm(tt.id); a.State != s.want {
					t.Fatalf("step %d (%v): %s, want %s (%q)", i, s.v, a.State, s.want, a.Reason)
				}
			}
		})
	}
}

func TestBadQualityMode(t *testing.T) {
	h := newHarness(t, "- {name: Comms, tag: Line2/Flow, mode: bad_quality, clear_delay: 5s}\n")
	id := "Line2/Flow:Comms"
	h.set("Line2/Flow", 1.0)
	h.wantState(id, Normal)
	h.setQ("Line2/Flow", nil, value.BadTimeout)
	a := h.wantState(id, ActiveUnacked)
	if !a.Evaluable || a.Message != "Line2/Flow:Comms: quality Bad_Timeout" {
		t.Errorf("evaluable %v message %q", a.Evaluable, a.Message)
	}
	h.set("Line2/Flow", 2.0)
	h.at(5*time.Second - 1)
	h.wantState(id, ActiveUnacked)
	h.at(5 * time.Second)
	h.wantState(id, RTNUnacked)
	// The last value before a restart is not a verdict.
	h.setQ("Line2/Flow", 2.0, value.UncertainLastUsableValue)
	if a := h.alarm(id); a.Evaluable {
		t.Error("evaluable on the last value before a restart")
	}
}

func TestRateMode(t *testing.T) {
	h := newHarness(t, "- {name: Fill, tag: Line1/Tank/Level, mode: rate, rate: 2, direction: rising, deadband: 0.5}\n")
	id := "Line1/Tank/Level:Fill"
	step := func(d time.Duration, v float64) {
		h.now = t0.Add(d)
		h.set("Line1/Tank/Level", v)
	}
	step(0, 10)
	step(time.Second, 11) // 1/s
	h.wantState(id, Normal)
	step(2*time.Second, 14) // 3/s
	a := h.wantState(id, ActiveUnacked)
	if !strings.Contains(a.Message, "changing at 3 %/s") {
		t.Errorf("message %q", a.Message)
	}
	step(3*time.Second, 15.6) // 1.6/s: in the deadband (1.5, 2]
	h.wantState(id, ActiveUnacked)
	step(4*time.Second, 14) // falling: rising rate −1.6 clears
	h.wantState(id, RTNUnacked)
	h.ack(operator, id)
	step(5*time.Second, 20) // 6/s
	h.wantState(id, ActiveUnacked)
	// No new sample: the rate falls to 0 after three intervals.
	h.at(8*time.Second - 1)
	h.wantState(id, ActiveUnacked)
	h.at(8 * time.Second)
	h.wantState(id, RTNUnacked)
}

func TestChattering(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, chattering: {count: 3, window: 60s}}\n")
	for i := range 3 {
		h.now = t0.Add(time.Duration(i) * 10 * time.Second)
		h.set("Line1/Tank/Level", 95.0)
		h.now = h.now.Add(5 * time.Second)
		h.set("Line1/Tank/Level", 80.0)
		if a := h.alarm(hiID); a.Chattering != (i == 2) {
			t.Fatalf("after %d activations chattering %v", i+1, a.Chattering)
		}
	}
	if st := h.e.Stats(time.Hour, nil); len(st.Chattering) != 1 || st.ChatteringTotal != 1 {
		t.Errorf("stats chattering %v total %d", st.Chattering, st.ChatteringTotal)
	}
	h.at(80*time.Second - 1) // the third activation was at 20 s; the first leaves the window at 60 s
	if a := h.alarm(hiID); a.Chattering {
		t.Error("still chattering with 2 activations in the window")
	}
	ev := h.events(hiID)
	if ev[len(ev)-1] != "chattering_end rtn_unacked→rtn_unacked" || !strings.Contains(strings.Join(ev, ";"), "chattering active_unacked→active_unacked") {
		t.Errorf("events %v", ev)
	}
}

func TestOutOfService(t *testing.T) {
	h := newHarness(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90, out_of_service: true}\n")
	h.set("Line1/Tank/Level", 95.0)
	a := h.alarm(hiID)
	if !a.OutOfService || a.Annunciated() || a.State != ActiveAcked {
		t.Fatalf("out of service: %+v", a)
	}
	insts, _ := parseDefs(t, "- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}\n")
	h.e.SetDefinitions(insts)
	h.wantState(hiID, ActiveUnacked)
	h.wantEvents(hiID, "activate_unannunciated normal→active_acked", "in_service out_of_service→active_unacked")
}

func TestOperations_LevelsAndPrefixes(t *testing.T) {
	h := newHarness(t, `- {name: High, tag: Line1/Tank/Level, mode: above, setpoint: 90}
- {name: Hi, tag: Line2/Flow, mode: above, setpoint: 10, ack_level: supervise}
`)
	h.set("Line1/Tank/Level", 95.0)
	h.set("Line2/Flow", 20.0)
	res := h.ack(viewer, hiID)
	if res[0].Status != value.BadUserAccessDenied || res[0].Reason != `acknowledging this alarm needs write level "operate" (its ack_level); yours is "view"` {
		t.Fatalf("view ack: %+v", res)
	}
	h.wantState(hiID, ActiveUnacked)
	res, _ = h.e.Ack(operator, nil, true)
	if len(res) != 2 || res[0].Status != value.Good || res[1].Status != value.BadUserAccessDenied {
		t.Fatalf("ack all at operate: %+v", res)
	}
	h.wantState(hiID, ActiveAcked)
	h.wantState("Line2/Flow:Hi", ActiveUnacked)
	limited := supervisor
	limited.Prefixes = []string{"Line1"}
	if res := h.ack(limited, "Line2/Flow:Hi", "nope:X"); res[0].Status != value.BadUserAccessDenied || res[1].Status != value.BadNodeIDUnknown {
		t.Errorf("prefix / unknown: %+v", res)
	}
	if list, sum := h.e.List(Filter{Allow: limited.AllowsPath}); len(list) != 1 || sum.Unacked != 0 || sum.Active != 1 {
		t.Errorf("list for Line1: %d alarms, %+v", len(list), sum)
	}
	if err := h.e.AddNote(viewer, hiID, "pump 2 checked"); err == nil || !strings.Contains(err.Error(), `write level "operate" required`) {
		t.Errorf("note at view: %v", err)
	}
	if err := h.e.AddNote(operator, hiID, "  pump 2 checked "); err != nil {
		t.Fatal(err)
	}
	if a := h.alarm(hiID); len(a.Notes) != 1 || a.Notes[0].Text != "pump 2 checked" || a.Notes[0].By != "ann" {
		t.Errorf("notes %+v", a.Notes)
	}
	if err := h.e.AddNote(operator, hiID, " "); err == nil {
		t.Error("empty note accepted")
	}
	_, sum := h.e.List(Filter{})
	if sum.Highest != PriorityMedium || sum.Unacked != 1 || sum.Active != 2 {
		t.Errorf("summary %+v", sum)
	}
}

func TestList_SortedByPriorityThenNewest(t *testing.T) {
	h := newHarness(t, `- {name: A, tag: Line1/Tank/Level, mode: above, setpoint: 1, priority: low}
- {name: B, tag: Line1/Tank/Level, mode: above, setpoint: 2, priority: critical}
- {name: C, tag: Line1/Tank/Level, mode: above, setpoint: 3, priority: low}
`)
	for i, v := range []float64{1.5, 2.5, 3.5} {
		h.now = t0.Add(time.Duration(i) * time.Second)
		h.set("Line1/Tank/Level", v)
	}
	list, _ := h.e.List(Filter{})
	var ids []string
	for _, a := range list {
		ids = append(ids, a.Name)
	}
	if strings.Join(ids, ",") != "B,C,A" {
		t.Errorf("order %v", ids)
	}
	if l, _ := h.e.List(Filter{Priorities: []Priority{PriorityLow}, States: []State{ActiveUnacked}}); len(l) != 2 {
		t.Errorf("filtered %d", len(l))
	}
}
