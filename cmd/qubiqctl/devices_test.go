package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const planBody = `[{"scan":"1s","function_code":3,"unit_id":1,"start":100,"count":12,"tags":["Line1/Pump/Speed","Line1/Pump/Setpoint"]},
{"scan":"1s","function_code":4,"unit_id":1,"start":0,"count":1,"tags":["Line1/Tank/Level"]},
{"scan":"5s","function_code":3,"unit_id":2,"start":0,"count":2,"tags":["Line1/Meter/Power"]}]`

// TestDevicesPlan: a Modbus plan is a table; an empty plan of an OPC UA or
// simulator device says why there is none (exit 1), of a Modbus device
// without tags says so (exit 0), never an empty table.
func TestDevicesPlan(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/devices":           {200, devicesBody},
		"GET /api/v1/devices/plc1/plan": {200, planBody},
		"GET /api/v1/devices/ua1/plan":  {200, `[]`},
		"GET /api/v1/devices/sim/plan":  {200, `[]`},
	})
	code, out, _ := runCLI("--url", d.srv.URL, "devices", "plan", "plc1")
	want := "SCAN  FC  UNIT  START  COUNT  TAGS\n" +
		"1s    03  1     100    12     Line1/Pump/Speed,Line1/Pump/Setpoint\n" +
		"1s    04  1     0      1      Line1/Tank/Level\n" +
		"5s    03  2     0      2      Line1/Meter/Power\n"
	if code != 0 || out != want {
		t.Errorf("plc1: exit %d output:\n%s", code, out)
	}
	code, out, errOut := runCLI("--url", d.srv.URL, "devices", "plan", "ua1")
	if code != 1 || out != "" || !strings.Contains(errOut, "device ua1 uses driver opcua: it has no request plan, its tags are monitored items") {
		t.Errorf("ua1: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI("--url", d.srv.URL, "devices", "plan", "sim")
	if code != 1 || !strings.Contains(errOut, "device sim uses driver sim: a request plan exists for Modbus devices only") {
		t.Errorf("sim: exit %d stderr %q", code, errOut)
	}
	empty := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/devices":           {200, devicesBody},
		"GET /api/v1/devices/plc1/plan": {200, `[]`},
	})
	code, out, _ = runCLI("--url", empty.srv.URL, "devices", "plan", "plc1")
	if code != 0 || out != "device plc1 has no tags to poll: its scan sends no request\n" {
		t.Errorf("empty plc1: exit %d output %q", code, out)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "--json", "devices", "plan", "ua1")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("--json ua1: exit %d output %q (the API's JSON, as it is)", code, out)
	}
}

// TestDevicesListAndShow: list shows driver, state, tags, the request
// statistics, URL and reason; show shows one device (GET
// /api/v1/devices/{name}), a Modbus device's request count per scan
// class, its statistics with the breaker of each unit, and every field a
// newer daemon adds after the known ones.
func TestDevicesListAndShow(t *testing.T) {
	clearEnv(t)
	last := time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339Nano)
	stats := `"stats":{"requests":1200,"errors":{"timeout":3,"exception":1,"not_connected":0},"errors_total":4,"timeouts":3,` +
		`"reconnects":1,"last_good":"` + last + `","latency_p50_ms":1.25,"latency_p99_ms":41.5,` +
		`"units":[{"unit_id":1,"breaker":"closed","timeouts":0},{"unit_id":2,"breaker":"open","timeouts":3,"demoted_until":"2026-12-01T10:00:30Z"}]}`
	withStats := strings.Replace(devicesBody, `"tags":3}`, `"tags":3,`+stats+`}`, 1)
	plc1 := `{"name":"plc1","driver":"modbus","url":"tcp://10.0.0.5:502","state":"connected","tags":3,` + stats + `,"breaker_note":"x"}`
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/devices":           {200, withStats},
		"GET /api/v1/devices/plc1":      {200, plc1},
		"GET /api/v1/devices/ua1":       {200, `{"name":"ua1","driver":"opcua","url":"opc.tcp://10.0.0.6:4840","state":"connecting","reason":"dial tcp: refused","tags":1}`},
		"GET /api/v1/devices/plc1/plan": {200, planBody},
	})
	code, out, _ := runCLI("--url", d.srv.URL, "devices", "list")
	want := "NAME  DRIVER  STATE       TAGS  REQUESTS  ERRORS  P50     P99     LAST GOOD   URL                      REASON\n" +
		"plc1  modbus  connected   3     1200      4       1.25ms  41.5ms  3h0m0s ago  tcp://10.0.0.5:502\n" +
		"ua1   opcua   connecting  1     -         -       -       -       -           opc.tcp://10.0.0.6:4840  dial tcp: refused\n" +
		"sim   sim     connected   0     -         -       -       -       -           -\n"
	if code != 0 || out != want {
		t.Errorf("list: exit %d output:\n%s\nwant:\n%s", code, out, want)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "devices", "show", "plc1")
	want = "name            plc1\n" +
		"driver          modbus\n" +
		"url             tcp://10.0.0.5:502\n" +
		"state           connected\n" +
		"tags            3\n" +
		"scan requests   3 per round of scans (1s: 2, 5s: 1); qubiqctl devices plan plc1 lists them\n" +
		"requests        1200\n" +
		"errors          4 (exception 1, timeout 3)\n" +
		"timeouts        3\n" +
		"reconnects      1\n" +
		"last good poll  " + last + " (3h0m0s ago)\n" +
		"last error      never\n" +
		"latency         p50 1.25ms, p99 41.5ms\n" +
		"unit 1 breaker  closed, 0 consecutive timeouts\n" +
		"unit 2 breaker  open, 3 consecutive timeouts, demoted until 2026-12-01T10:00:30Z\n" +
		"breaker_note    \"x\"\n"
	if code != 0 || out != want {
		t.Errorf("show plc1: exit %d output:\n%s\nwant:\n%s", code, out, want)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "devices", "show", "ua1")
	if code != 0 || !strings.Contains(out, "reason  dial tcp: refused\n") || strings.Contains(out, "requests") {
		t.Errorf("show ua1: exit %d output:\n%s", code, out)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "--json", "devices", "show", "plc1")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got["stats"] == nil || got["plan"] == nil {
		t.Errorf("show --json: exit %d err %v output %s", code, err, out)
	}
	code, _, errOut := runCLI("--url", d.srv.URL, "devices", "show", "plc9")
	if code != 1 || !strings.Contains(errOut, `no device "plc9" (the project has: plc1, ua1, sim)`) {
		t.Errorf("show plc9: exit %d stderr %q", code, errOut)
	}
}
