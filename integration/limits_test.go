//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// Tag limits are enforced on the server, in the write path, whoever
// writes: REST with an API key, a LiveView session's write, a script's
// system.tag.write, a flow's tag_write node. Each refusal is
// Bad_OutOfRange with the limit in the reason; a value at the limit is
// written. A scaled write whose raw value the register cannot hold is
// refused the same way, naming the raw value and the type's range.
func TestLimits_EveryEntryPoint(t *testing.T) {
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 0}}})
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: sim, driver: sim}
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 500ms}
tags:
  - {path: Line1/Setpoint, device: sim, address: memory, type: float64, units: rpm, min: 0, max: 100}
  - {path: Line1/Trigger, device: sim, address: memory, type: float64}
  - {path: Line1/Scaled, device: plc1, address: HR0, type: int16, scale: {factor: 0.1}, scan: 200ms}
flows:
  - name: copy
    trigger: {tag: Line1/Trigger}
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - {id: write, type: tag_write, path: Line1/Setpoint}
`, mb.Port))
	d.start()
	op := d.apiKey("op", []string{"tag:read", "tag:write", "script:execute"}, "operate", "designer")
	const above = "out of range: 150 is above the tag's max of 100 (limits 0 to 100)"

	// REST with an API key; GET /tags shows the limits.
	var res []struct{ Path, Status, Reason string }
	write := func(token string, v any) (string, string) {
		t.Helper()
		res = nil
		if st, body := d.call("POST", "/api/v1/tags/write", token, map[string]any{"writes": []map[string]any{{"path": "Line1/Setpoint", "value": v}}}, &res); st != 200 {
			t.Fatalf("write: %d %s", st, body)
		}
		return res[0].Status, res[0].Reason
	}
	if st, why := write(op, 150); st != "Bad_OutOfRange" || why != above {
		t.Errorf("REST 150: %s %q, want Bad_OutOfRange %q", st, why, above)
	}
	if st, why := write(op, -1); st != "Bad_OutOfRange" || why != "out of range: -1 is below the tag's min of 0 (limits 0 to 100)" {
		t.Errorf("REST -1: %s %q", st, why)
	}
	if st, why := write(op, 100); st != "Good" {
		t.Errorf("REST 100 (the max): %s %q, want Good", st, why)
	}
	var tags []struct {
		Path string   `json:"path"`
		Min  *float64 `json:"min"`
		Max  *float64 `json:"max"`
	}
	d.call("GET", "/api/v1/tags", op, nil, &tags)
	for _, tg := range tags {
		if tg.Path == "Line1/Setpoint" && (tg.Min == nil || *tg.Min != 0 || tg.Max == nil || *tg.Max != 100) {
			t.Errorf("GET /tags Line1/Setpoint limits %v %v, want 0 and 100", tg.Min, tg.Max)
		}
	}

	// A scaled write: 4000 rpm is raw 40000, which an int16 cannot hold.
	res = nil
	d.call("POST", "/api/v1/tags/write", op, map[string]any{"writes": []map[string]any{{"path": "Line1/Scaled", "value": 4000}}}, &res)
	if want := "out of range: 4000 scales to the raw value 40000, outside the int16 range (-32768 to 32767)"; len(res) != 1 ||
		res[0].Status != "Bad_OutOfRange" || res[0].Reason != want {
		t.Errorf("scaled write: %+v, want Bad_OutOfRange %q", res, want)
	}
	if got := mb.ReadHR(1, 0, 1); got[0] != 0 {
		t.Errorf("HR0 = %d after the refused write, want 0 (nothing reached the device)", got[0])
	}

	// A script's system.tag.write.
	code := "def set(args):\n    return system.tag.write([\"Line1/Setpoint\"], [args[\"v\"]])\n"
	if st, body := d.call("PUT", "/api/v1/scripts/lim", op, map[string]any{"code": code}, nil); st != 200 {
		t.Fatalf("save script: %d %s", st, body)
	}
	var run struct {
		Result json.RawMessage `json:"result"`
	}
	if st, body := d.call("POST", "/api/v1/scripts/lim/set/run", op, map[string]any{"args": map[string]any{"v": 150}}, &run); st != 200 {
		t.Fatalf("run: %d %s", st, body)
	}
	if got := string(run.Result); !strings.Contains(got, "Bad_OutOfRange") {
		t.Errorf("script write of 150: %s, want Bad_OutOfRange", got)
	}

	// A flow's tag_write node: the trigger's value 150 is refused.
	d.write(op, map[string]any{"Line1/Trigger": 150})
	f := d.waitFlow(op, "copy", 10*time.Second, "the refused write", func(f flowInfo) bool { return f.Counters.Errors >= 1 })
	if f.LastError == nil || !strings.Contains(f.LastError.Message, "Bad_OutOfRange") || !strings.Contains(f.LastError.Message, "max of 100") {
		t.Errorf("flow last error %+v, want Bad_OutOfRange naming the max", f.LastError)
	}

	// A LiveView session's write (the panel's Set).
	d.qubiqctl(d.token, "users", "add", "--name", "op1", "--realm", "operator", "--level", "operate", "--password-file", writeTemp(t, e2ePassword))
	s, code2 := d.login("op1", e2ePassword)
	if code2 != 200 {
		t.Fatalf("login: %d", code2)
	}
	st, body := s.do("POST", "/api/v1/tags/write", "application/json", `{"writes":[{"path":"Line1/Setpoint","value":150}]}`,
		map[string]string{"X-CSRF-Token": s.csrf})
	if st != 200 || !strings.Contains(body, `"status":"Bad_OutOfRange"`) || !strings.Contains(body, "max of 100") {
		t.Errorf("LiveView session write of 150: %d %s", st, body)
	}

	// The value written at the max is the one the tag holds: no refused
	// write reached the device.
	if v := d.read(op, "Line1/Setpoint")["Line1/Setpoint"]; v.Value.String() != "100" {
		t.Errorf("Line1/Setpoint = %v, want 100", v)
	}
}
