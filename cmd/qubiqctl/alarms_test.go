package main

import (
	"strings"
	"testing"
)

const alarmListBody = `{"alarms":[{"id":"Line1/Tank/Level:High","name":"High","source":"Line1/Tank/Level","display_path":"Tank 1",
"priority":"high","mode":"above","ack_mode":"manual","state":"active_unacked","active":true,"acked":false,
"shelved":{"by":"sue","until":"2025-03-01T13:00:00Z","one_shot":false,"at":"2025-03-01T12:00:00Z"},"suppressed":false,
"out_of_service":false,"latched":false,"chattering":true,"evaluable":true,"reason":"","message":"Tank level high: 93.2 %",
"value":93.2,"units":"%","quality":"Good","setpoint":90,"active_since":"2025-03-01T12:00:00Z","acked_at":null,"acked_by":null,
"last_change":"2025-03-01T12:00:00Z","ack_level":"operate","shelve_level":"supervise","notes":[]},
{"id":"Line1/Tank/Level:Low","name":"Low","source":"Line1/Tank/Level","display_path":"Tank 1",
"priority":"low","mode":"below","ack_mode":"manual","state":"rtn_unacked","active":false,"acked":false,
"shelved":null,"suppressed":false,"out_of_service":false,"latched":false,"chattering":false,"evaluable":true,"reason":"",
"message":"Tank level low: 12.0 %","value":12,"units":"%","quality":"Good","setpoint":10,"active_since":null,"acked_at":null,
"acked_by":null,"last_change":"2025-03-01T12:05:00Z","ack_level":"operate","shelve_level":"supervise","notes":[]}],
"unacked":2,"active":1,"highest":"high"}`

func TestAlarms_ListTable(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/alarms": {200, alarmListBody}})
	code, out, errOut := runCLI("--url", d.srv.URL, "alarms", "list", "--state", "active_unacked,rtn_unacked", "--priority", "high")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"PRIORITY  STATE           ID", "high      active_unacked  Line1/Tank/Level:High",
		"shelved until 13:00:00Z by sue, chattering", "Tank level high: 93.2 %",
		// an alarm that returned to normal has no SINCE: "-", never "never"
		"low       rtn_unacked     Line1/Tank/Level:Low   -                     -  ",
		"2 unacknowledged, 1 active, highest priority high"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAlarms_AckExitsOneOnARefusal(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/alarms/ack": {200,
		`{"results":[{"id":"A:x","status":"Good"},{"id":"B:y","status":"Bad_UserAccessDenied","reason":"acknowledging this alarm needs write level \"supervise\""}]}`}})
	code, out, errOut := runCLI("--url", d.srv.URL, "alarms", "ack", "A:x", "B:y")
	if code != 1 || !strings.Contains(errOut, "1 of 2 alarms were not acknowledged") || !strings.Contains(out, `needs write level "supervise"`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if b := d.find(t, "POST", "/api/v1/alarms/ack").body; b != `{"ids":["A:x","B:y"]}` {
		t.Errorf("body %s", b)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "alarms", "ack"); code != 2 || !strings.Contains(errOut, "want ID... or --all") {
		t.Errorf("ack without ids: %d %s", code, errOut)
	}
}

func TestAlarms_ShelveNeedsADuration(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/alarms/shelve": {200, `{"results":[{"id":"A:x","status":"Good"}]}`}})
	if code, _, errOut := runCLI("--url", d.srv.URL, "alarms", "shelve", "A:x"); code != 2 || !strings.Contains(errOut, "never forever") {
		t.Fatalf("shelve without --for: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "alarms", "shelve", "--for", "30m", "A:x"); code != 0 {
		t.Fatalf("shelve: %d %s", code, errOut)
	}
	if b := d.find(t, "POST", "/api/v1/alarms/shelve").body; b != `{"ids":["A:x"],"duration_s":1800}` {
		t.Errorf("body %s", b)
	}
}

func TestAlarms_JournalAndStats(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/alarms/journal": {200, `{"entries":[{"seq":3,"at":"2025-03-01T12:00:02Z","id":"A:x","source":"A","priority":"high","event":"ack","from":"active_unacked","to":"active_acked","cause":"acknowledged","by":"ann","value":91,"quality":"Good"}],"next":3}`},
		"GET /api/v1/alarms/stats":   {200, `{"window_h":1,"activations":14,"rate_per_10min":2.33,"rate_per_hour":14,"max_per_10min":11,"floods":1,"flood_pct":16.7,"stale":[],"top":[{"id":"A:x","count":9}],"chattering":["A:x"],"alarms":3}`},
	})
	code, out, errOut := runCLI("--url", d.srv.URL, "alarms", "journal", "--path", "A", "--limit", "1", "--newest")
	if code != 0 || !strings.Contains(out, "ack    active_unacked  active_acked  ann") || !strings.Contains(out, "more: --after 3") {
		t.Fatalf("journal: %d\n%s%s", code, out, errOut)
	}
	if p := d.last(t).path; p != "/api/v1/alarms/journal" {
		t.Errorf("path %s", p)
	}
	code, out, errOut = runCLI("--url", d.srv.URL, "alarms", "stats", "--window", "24h")
	if code != 0 || !strings.Contains(out, "rate per 10 min         2.33") || !strings.Contains(out, "floods (>10 in 10 min)  1 (16.7% of the window)") ||
		!strings.Contains(out, "top 10                  A:x (9)") {
		t.Fatalf("stats: %d\n%s%s", code, out, errOut)
	}
}
