//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// Flows (issue 13; docs/flows.md) against the built qubiqd, with real
// Python workers, the simulator and a pymodbus server.

type flowInfo struct {
	Name      string `json:"name"`
	Version   int64  `json:"version"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Queue     int    `json:"queue"`
	QueueSize int    `json:"queue_size"`
	Counters  struct {
		In, Processed, Out, Filtered, Errors, Dropped, Timeouts uint64
	} `json:"counters"`
	LastError *struct {
		Node, Kind, Message string
		Line                int
	} `json:"last_error"`
	Nodes []struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Runs   uint64 `json:"runs"`
		Errors uint64 `json:"errors"`
	} `json:"nodes"`
}

// flows returns GET /api/v1/flows by name.
func (d *daemon) flows(token string) map[string]flowInfo {
	d.t.Helper()
	var list []flowInfo
	if st, body := d.call("GET", "/api/v1/flows", token, nil, &list); st != 200 {
		d.t.Fatalf("GET /flows: %d %s", st, body)
	}
	out := map[string]flowInfo{}
	for _, f := range list {
		out[f.Name] = f
	}
	return out
}

// waitFlow polls the flow until cond holds.
func (d *daemon) waitFlow(token, name string, within time.Duration, what string, cond func(flowInfo) bool) flowInfo {
	d.t.Helper()
	var last flowInfo
	waitFor(d.t, within, "flow "+name+": "+what, func() (bool, string) {
		last = d.flows(token)[name]
		return cond(last), fmt.Sprintf("%+v", last)
	})
	return last
}

func (d *daemon) write(token string, writes map[string]any) {
	d.t.Helper()
	var ws []map[string]any
	for p, v := range writes {
		ws = append(ws, map[string]any{"path": p, "value": v})
	}
	var res []struct{ Path, Status, Reason string }
	if st, body := d.call("POST", "/api/v1/tags/write", token, map[string]any{"writes": ws}, &res); st != 200 {
		d.t.Fatalf("write: %d %s", st, body)
	}
	for _, r := range res {
		if r.Status != "Good" {
			d.t.Fatalf("write %s: %s %s", r.Path, r.Status, r.Reason)
		}
	}
}

// policyProject has, for each misbehaviour (raise, spin past the node
// timeout, return garbage) and each error policy, a flow on T/Trigger
// whose Python node misbehaves when the value is 1 and passes the message
// on otherwise; route sends the failure to a branch writing the error's
// kind and message to T/Err/<flow>.
func policyProject() string {
	var b strings.Builder
	b.WriteString("devices:\n  - {name: sim, driver: sim}\ntags:\n  - {path: T/Trigger, device: sim, address: memory, type: int64}\n")
	bodies := map[string][]string{
		"raise":   {`raise ValueError("bad input")`},
		"spin":    {"while True:", "    pass"},
		"garbage": {"return 42"},
	}
	var flows strings.Builder
	for _, bad := range []string{"raise", "spin", "garbage"} {
		for _, policy := range []string{"drop", "route", "fail"} {
			name := bad + "-" + policy
			fmt.Fprintf(&b, "  - {path: T/Out/%s, device: sim, address: memory, type: int64}\n", name)
			fmt.Fprintf(&b, "  - {path: T/Err/%s, device: sim, address: memory, type: string}\n", name)
			fmt.Fprintf(&flows, "  - name: %s\n    trigger: {tag: T/Trigger}\n", name)
			flows.WriteString("    grant: {scopes: [tag:read, tag:write], write_level: operate}\n    nodes:\n")
			fmt.Fprintf(&flows, "      - id: node\n        type: python\n        timeout: 300ms\n        on_error: %s\n        next: out\n", policy)
			if policy == "route" {
				flows.WriteString("        error: alert\n")
			}
			flows.WriteString("        code: |\n          def transform(msg):\n              if msg[\"value\"] == 1:\n")
			for _, l := range bodies[bad] {
				flows.WriteString("                  " + l + "\n")
			}
			flows.WriteString("              return msg\n")
			fmt.Fprintf(&flows, "      - {id: out, type: tag_write, path: T/Out/%s}\n", name)
			if policy == "route" {
				flows.WriteString("      - id: alert\n        type: python\n        next: record\n        code: |\n" +
					"          def transform(msg):\n              msg[\"payload\"] = msg[\"error\"][\"kind\"] + \": \" + msg[\"error\"][\"message\"]\n              return msg\n")
				fmt.Fprintf(&flows, "      - {id: record, type: tag_write, path: T/Err/%s}\n", name)
			}
		}
	}
	b.WriteString("flows:\n")
	b.WriteString(flows.String())
	return b.String()
}

// writeFileIn writes a file beside the test daemon's project.
func writeFileIn(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFlows_ErrorPolicies: a node that raises, one that times out (a
// short node timeout) and one that returns garbage, under drop, route
// and fail; the error says which failure it was; a failed node stays
// failed (health says so) until it is reset through the API, then runs
// again.
func TestFlows_ErrorPolicies(t *testing.T) {
	d := newDaemon(t, policyProject())
	d.start()
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	all := []string{}
	for _, bad := range []string{"raise", "spin", "garbage"} {
		for _, policy := range []string{"drop", "route", "fail"} {
			all = append(all, bad+"-"+policy)
		}
	}
	kind := map[string]string{"raise": "exception", "spin": "timeout", "garbage": "bad_return"}
	detail := map[string]string{"raise": "ValueError: bad input", "spin": "ran past its timeout of 300ms",
		"garbage": "transform returned 42, which is not a message"}

	d.write(d.token, map[string]any{"T/Trigger": 1})
	for _, name := range all {
		bad, policy, _ := strings.Cut(name, "-")
		f := d.waitFlow(reader, name, 30*time.Second, "the failing message processed", func(f flowInfo) bool { return f.Counters.Processed == 1 })
		if f.Counters.Errors != 1 || f.LastError == nil || f.LastError.Kind != kind[bad] || !strings.Contains(f.LastError.Message, detail[bad]) {
			t.Errorf("%s: counters %+v last error %+v; want one %s error saying %q", name, f.Counters, f.LastError, kind[bad], detail[bad])
		}
		if bad == "raise" && f.LastError != nil && f.LastError.Line != 3 {
			t.Errorf("%s: the exception's line %d, want 3", name, f.LastError.Line)
		}
		if (bad == "spin") != (f.Counters.Timeouts == 1) {
			t.Errorf("%s: timeouts %d", name, f.Counters.Timeouts)
		}
		switch policy {
		case "drop":
			if f.State != "running" || f.Counters.Out != 0 {
				t.Errorf("%s: %s, out %d; want running, nothing out", name, f.State, f.Counters.Out)
			}
		case "route":
			waitFor(t, 10*time.Second, name+": the error branch wrote the error", func() (bool, string) {
				v := d.read(reader, "T/Err/"+name)["T/Err/"+name]
				return strings.HasPrefix(v.Value.String(), kind[bad]+": ") && strings.Contains(v.Value.String(), detail[bad]), fmt.Sprintf("%+v", v)
			})
		case "fail":
			if f.State != "failed" || !strings.Contains(f.Reason, "node node failed: "+kind[bad]) {
				t.Errorf("%s: state %s reason %q; want failed naming the node and the kind", name, f.State, f.Reason)
			}
		}
	}
	var health struct {
		Status string                       `json:"status"`
		Flows  map[string]map[string]string `json:"flows"`
	}
	if st, body := d.call("GET", "/api/v1/health", "", nil, &health); st != 200 || health.Status != "degraded" ||
		health.Flows["raise-fail"]["state"] != "failed" || health.Flows["raise-drop"]["state"] != "running" {
		t.Errorf("health: %d %s", st, body)
	}

	// A good message: drop and route pass it; a failed node drops it (counted).
	d.write(d.token, map[string]any{"T/Trigger": 2})
	for _, name := range all {
		_, policy, _ := strings.Cut(name, "-")
		f := d.waitFlow(reader, name, 30*time.Second, "the good message processed or dropped", func(f flowInfo) bool {
			return f.Counters.Processed+f.Counters.Dropped == 2
		})
		out := d.read(reader, "T/Out/"+name)["T/Out/"+name].Value.String()
		if policy == "fail" {
			if out == "2" || f.Counters.Dropped != 1 || f.Counters.Processed != 1 {
				t.Errorf("%s: out %s dropped %d; a failed node must not run, the message counted as dropped", name, out, f.Counters.Dropped)
			}
			continue
		}
		if out != "2" {
			t.Errorf("%s: T/Out = %s, want 2", name, out)
		}
	}
	// Reset through the API: the failed node runs again.
	for _, name := range all {
		if !strings.HasSuffix(name, "-fail") {
			continue
		}
		var f flowInfo
		if st, body := d.call("POST", "/api/v1/flows/"+name+"/reset", d.token, nil, &f); st != 200 || f.State != "running" {
			t.Fatalf("reset %s: %d %s", name, st, body)
		}
	}
	d.write(d.token, map[string]any{"T/Trigger": 3})
	for _, name := range all {
		if !strings.HasSuffix(name, "-fail") {
			continue
		}
		waitFor(t, 30*time.Second, name+": runs again after the reset", func() (bool, string) {
			v := d.read(reader, "T/Out/"+name)["T/Out/"+name]
			return v.Value.String() == "3", fmt.Sprintf("%+v", v)
		})
		if f := d.flows(reader)[name]; f.State != "running" || f.Nodes[0].Runs != 2 {
			t.Errorf("%s after the reset: %+v", name, f)
		}
	}
	// An operator may read the flows but not reset them.
	if st, _ := d.call("POST", "/api/v1/flows/raise-fail/reset", reader, nil, nil); st != 403 {
		t.Errorf("reset without designer: %d, want 403", st)
	}
}

// TestFlows_SimulatorTagToModbus: a simulator tag's change, scaled by a
// Python node, is written to a Modbus holding register, checked on the
// pymodbus server itself.
func TestFlows_SimulatorTagToModbus(t *testing.T) {
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{10: 0}}})
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: sim, driver: sim}
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 500ms}
tags:
  - {path: Line1/Raw, device: sim, address: memory, type: float64}
  - {path: Line1/Setpoint, device: plc1, address: HR10, type: int16, scan: 200ms}
flows:
  - name: scale
    trigger: {tag: Line1/Raw}
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - id: scale
        type: python
        next: write
        code: |
            def transform(msg):
                if msg["quality"] != "Good":
                    return None
                msg["payload"] = round(msg["value"] * 0.1 + 3)
                return msg
      - {id: write, type: tag_write, path: Line1/Setpoint}
`, mb.Port))
	d.start()
	d.write(d.token, map[string]any{"Line1/Raw": 420})
	waitFor(t, 20*time.Second, "the scaled value on the pymodbus server", func() (bool, string) {
		regs := mb.ReadHR(1, 10, 1)
		return regs[0] == 45, fmt.Sprint(regs)
	})
	d.write(d.token, map[string]any{"Line1/Raw": -700})
	waitFor(t, 20*time.Second, "the second scaled value on the pymodbus server", func() (bool, string) {
		regs := mb.ReadHR(1, 10, 1)
		return int16(regs[0]) == -67, fmt.Sprint(int16(regs[0]))
	})
	var audit []struct {
		Principal, Action, Target, Result string
	}
	if st, body := d.call("GET", "/api/v1/audit?limit=1000", d.token, nil, &audit); st != 200 {
		t.Fatalf("audit: %d %s", st, body)
	}
	found := false
	for _, a := range audit {
		found = found || (a.Principal == "flow:scale" && a.Action == "tag.write" && a.Target == "Line1/Setpoint")
	}
	if !found {
		t.Errorf("no audit record of the flow's write to Line1/Setpoint: %+v", audit)
	}
}

// TestFlows_BadTriggerReachesTheNode: a trigger tag going Bad reaches the
// node as Bad (the message carries the quality), and is skipped where the
// flow passes only Good values.
func TestFlows_BadTriggerReachesTheNode(t *testing.T) {
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 7}}})
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: sim, driver: sim}
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 200ms}
tags:
  - {path: Line1/Level, device: plc1, address: HR0, type: int16, scan: 200ms}
  - {path: Seen/All, device: sim, address: memory, type: string}
  - {path: Seen/GoodOnly, device: sim, address: memory, type: string}
flows:
  - name: all
    trigger: {tag: Line1/Level}
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - {id: q, type: python, next: w, code: "def transform(msg):\n    msg['payload'] = msg['quality'] + ' ' + str(msg['value'])\n    return msg\n"}
      - {id: w, type: tag_write, path: Seen/All, allow_bad_quality: true}
  - name: good-only
    trigger: {tag: Line1/Level}
    only_good: true
    grant: {scopes: [tag:read, tag:write], write_level: operate}
    nodes:
      - {id: q, type: python, next: w, code: "def transform(msg):\n    msg['payload'] = msg['quality'] + ' ' + str(msg['value'])\n    return msg\n"}
      - {id: w, type: tag_write, path: Seen/GoodOnly}
`, mb.Port))
	d.start()
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	waitFor(t, 20*time.Second, "the level read", func() (bool, string) {
		v := d.read(reader, "Line1/Level")["Line1/Level"]
		return v.Quality == "Good", fmt.Sprintf("%+v", v)
	})
	d.write(d.token, map[string]any{"Line1/Level": 8}) // a change, through the device
	waitFor(t, 20*time.Second, "the Good value seen by both", func() (bool, string) {
		r := d.read(reader, "Seen/All", "Seen/GoodOnly")
		return r["Seen/All"].Value.String() == "Good 8" && r["Seen/GoodOnly"].Value.String() == "Good 8", fmt.Sprintf("%+v", r)
	})
	mb.Stop()
	waitFor(t, 20*time.Second, "the Bad value reaching the node as Bad", func() (bool, string) {
		v := d.read(reader, "Seen/All")["Seen/All"]
		return strings.HasPrefix(v.Value.String(), "Bad_") && strings.HasSuffix(v.Value.String(), " 8"), fmt.Sprintf("%+v", v)
	})
	g := d.waitFlow(reader, "good-only", 10*time.Second, "the Bad value skipped", func(f flowInfo) bool { return f.Counters.Filtered >= 1 })
	if v := d.read(reader, "Seen/GoodOnly")["Seen/GoodOnly"].Value.String(); v != "Good 8" {
		t.Errorf("good-only wrote %q: a Bad value got through", v)
	}
	if g.Nodes[0].Runs != 1 {
		t.Errorf("good-only's node ran %d times, want once (the Bad change is skipped before it)", g.Nodes[0].Runs)
	}
}

// TestFlows_BurstIntoSmallQueue: 10,000 tag changes into a flow with a
// queue of 100 and a slow node: processed + dropped add up to exactly
// 10,000, and the tag engine keeps scanning meanwhile.
func TestFlows_BurstIntoSmallQueue(t *testing.T) {
	d := newDaemon(t, `devices:
  - {name: sim, driver: sim}
tags:
  - {path: B/In, device: sim, address: memory, type: int64}
  - {path: B/Ramp, device: sim, address: "ramp(0,1000,10s)", type: float64, scan: 100ms}
scripts:
  - {module: burst, file: burst.py}
flows:
  - name: witness
    trigger: {tag: B/In}
    queue: 100000
    nodes: [{id: e, type: end}]
  - name: burst
    trigger: {tag: B/In}
    queue: 100
    nodes:
      - id: slow
        type: python
        code: |
            def transform(msg):
                n = 0
                for i in range(20000):
                    n += i
                return msg
`)
	writeFileIn(t, d.dir, "burst.py", `
@gateway(timeout_ms=60000)
def burst(args):
    n = args["n"]
    for start in range(0, n, 1000):
        vals = list(range(start + 1, min(start + 1000, n) + 1))
        st = system.tag.write(["B/In"] * len(vals), vals)
        if any(s != "Good" for s in st):
            return {"refused": [s for s in st if s != "Good"][:3]}
    return {"written": n}
`)
	d.start()
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	waitFor(t, 20*time.Second, "B/In read", func() (bool, string) {
		v := d.read(reader, "B/In")["B/In"]
		return v.Quality == "Good", fmt.Sprintf("%+v", v)
	})
	time.Sleep(500 * time.Millisecond)
	in0 := d.flows(reader)["witness"].Counters.In
	stale := make(chan time.Duration, 1)
	stop := make(chan struct{})
	go func() { // the ramp's timestamp, while the burst runs: the scans go on
		var worst time.Duration
		body := `{"paths": ["B/Ramp"]}`
		for {
			select {
			case <-stop:
				stale <- worst
				return
			case <-time.After(50 * time.Millisecond):
			}
			req, _ := http.NewRequest("POST", d.url+"/api/v1/tags/read", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+reader)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			var rows []struct{ Timestamp time.Time }
			_ = json.NewDecoder(resp.Body).Decode(&rows)
			resp.Body.Close()
			if len(rows) == 1 {
				worst = max(worst, time.Since(rows[0].Timestamp))
			}
		}
	}()
	var run struct {
		Result map[string]any `json:"result"`
	}
	if st, body := d.call("POST", "/api/v1/scripts/burst/burst/run", d.token, map[string]any{"args": map[string]any{"n": 10000}}, &run); st != 200 || run.Result["written"] == nil {
		close(stop)
		<-stale
		t.Fatalf("burst: %d %s", st, body)
	}
	// The witness, with a queue that never fills, counts the changes the
	// tag engine published (at least the 10,000 written).
	w := d.waitFlow(reader, "witness", 60*time.Second, "every change seen", func(f flowInfo) bool {
		return f.Counters.In-in0 >= 10000 && f.Queue == 0 && f.Counters.Processed == f.Counters.In
	})
	f := d.waitFlow(reader, "burst", 120*time.Second, "every change processed or dropped", func(f flowInfo) bool {
		return f.Queue == 0 && f.Counters.Processed+f.Counters.Dropped == f.Counters.In && f.Counters.In == w.Counters.In
	})
	close(stop)
	worst := <-stale
	if w.Counters.Dropped != 0 {
		t.Errorf("the witness dropped %d", w.Counters.Dropped)
	}
	if f.Counters.Dropped == 0 || f.Counters.Processed < 100 {
		t.Errorf("counters %+v: want some dropped (the queue holds 100), the rest processed", f.Counters)
	}
	t.Logf("burst: %d changes published (%d written), processed %d + dropped %d = %d; the ramp tag at most %s old",
		w.Counters.In-in0, 10000, f.Counters.Processed, f.Counters.Dropped, f.Counters.In, worst)
	// 100 ms scans: a timestamp 20 scans old would mean the scans stalled.
	if worst > 2*time.Second {
		t.Errorf("the ramp tag went %s without a new value during the burst: the tag engine was held up", worst)
	}
	var health struct {
		Flows map[string]map[string]string `json:"flows"`
	}
	d.call("GET", "/api/v1/health", "", nil, &health)
	if _, lost := health.Flows["(tag feed)"]; lost {
		t.Errorf("the flows' tag feed lost changes: %v", health.Flows)
	}
}

// TestFlows_GrantWithoutTagWrite: a flow whose grant lacks tag:write
// cannot write (its Python node's system.tag.write is refused, the device
// keeps its value); a push of a tag_write without tag:write is refused
// naming it; a designer cannot push a flow wider than its own grant.
func TestFlows_GrantWithoutTagWrite(t *testing.T) {
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{20: 5}}})
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: sim, driver: sim}
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 500ms}
tags:
  - {path: G/In, device: sim, address: memory, type: int64}
  - {path: G/Out, device: plc1, address: HR20, type: int16, scan: 200ms}
flows:
  - name: readonly
    trigger: {tag: G/In}
    grant: {scopes: [tag:read], write_level: operate}
    nodes:
      - id: sneak
        type: python
        code: |
            def transform(msg):
                system.tag.write(["G/Out"], [99])
                return msg
`, mb.Port))
	d.start()
	d.write(d.token, map[string]any{"G/In": 1})
	f := d.waitFlow(d.token, "readonly", 20*time.Second, "the refused write", func(f flowInfo) bool { return f.Counters.Errors == 1 })
	if f.LastError.Kind != "permission_denied" || !strings.Contains(f.LastError.Message, `"tag:write"`) {
		t.Errorf("last error %+v, want permission_denied naming tag:write", f.LastError)
	}
	time.Sleep(500 * time.Millisecond)
	if regs := mb.ReadHR(1, 20, 1); regs[0] != 5 {
		t.Errorf("HR20 = %d on the device: the flow wrote without tag:write", regs[0])
	}
	push := func(token, name, def string) (int, string) {
		st, body := d.call("PUT", "/api/v1/flows/"+name, token, map[string]any{"definition": def}, nil)
		return st, string(body)
	}
	st, body := push(d.token, "writer", "trigger: {tag: G/In}\ngrant: {scopes: [tag:read]}\nnodes:\n  - {id: w, type: tag_write, path: G/Out}\n")
	if st != 400 || !strings.Contains(body, `writes tag \"G/Out\", but the flow's grant has no tag:write`) || !strings.Contains(body, `"line":4`) {
		t.Errorf("push of a tag_write without tag:write: %d %s", st, body)
	}
	narrow := d.apiKey("narrow-designer", []string{"tag:read", "tag:write"}, "view", "designer")
	st, body = push(narrow, "writer", "trigger: {tag: G/In}\ngrant: {scopes: [tag:read, tag:write], write_level: operate}\nnodes:\n  - {id: w, type: tag_write, path: G/Out}\n")
	if st != 403 || !strings.Contains(body, `write level \"operate\"`) {
		t.Errorf("a flow wider than its designer: %d %s", st, body)
	}
}

// TestFlows_NewVersionKeepsQueuedMessages: a version pushed while
// messages wait takes them over; its smaller queue says how many it
// dropped; processed + dropped add up; the new version's node ran the
// carried ones.
func TestFlows_NewVersionKeepsQueuedMessages(t *testing.T) {
	d := newDaemon(t, `devices:
  - {name: sim, driver: sim}
tags:
  - {path: V/In, device: sim, address: memory, type: int64}
flows:
  - name: v
    trigger: {tag: V/In}
    queue: 100
    grant: {scopes: [tag:read, vars:read]}
    nodes:
      - id: held
        type: python
        code: |
            def transform(msg):
                while system.vars.get("hold", False):
                    pass
                return msg
`)
	d.start()
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	if st, body := d.call("PUT", "/api/v1/vars/hold", d.token, map[string]any{"value": true}, nil); st >= 300 {
		t.Fatalf("set hold: %d %s", st, body)
	}
	d.write(d.token, map[string]any{"V/In": 100})
	d.waitFlow(reader, "v", 20*time.Second, "the first message held", func(f flowInfo) bool { return f.Nodes[0].Runs == 1 })
	for i := 1; i <= 19; i++ {
		d.write(d.token, map[string]any{"V/In": i})
	}
	d.waitFlow(reader, "v", 20*time.Second, "19 queued", func(f flowInfo) bool { return f.Queue == 19 })
	v2 := `trigger: {tag: V/In}
queue: 10
grant: {scopes: [tag:read, vars:write]}
nodes:
  - id: count
    type: python
    code: |
        def transform(msg):
            system.vars.incr("v2_runs")
            return msg
`
	type savedT struct {
		Version int64  `json:"version"`
		Carried int    `json:"carried"`
		Dropped uint64 `json:"dropped"`
	}
	pushed := make(chan savedT, 1)
	go func() {
		var saved savedT
		if st, body := d.call("PUT", "/api/v1/flows/v", d.token, map[string]any{"definition": v2}, &saved); st != 200 {
			t.Errorf("push: %d %s", st, body)
		}
		pushed <- saved
	}()
	waitFor(t, 20*time.Second, "version 2 waiting for version 1's batch", func() (bool, string) {
		return strings.Contains(d.logs(), "a new version waits for the running one to finish its batch"), ""
	})
	if st, body := d.call("PUT", "/api/v1/vars/hold", d.token, map[string]any{"value": false}, nil); st >= 300 {
		t.Fatalf("release: %d %s", st, body)
	}
	saved := <-pushed
	if saved.Version != 2 || saved.Carried != 10 || saved.Dropped != 9 {
		t.Fatalf("saved %+v: want version 2 carrying 10 (its queue) and saying it dropped the 9 oldest", saved)
	}
	f := d.waitFlow(reader, "v", 60*time.Second, "drained", func(f flowInfo) bool { return f.Queue == 0 && f.Counters.Processed == 11 })
	if f.Counters.In != 20 || f.Counters.Dropped != 9 || f.Version != 2 {
		t.Errorf("after the push: %+v", f)
	}
	var count struct {
		Value json.Number `json:"value"`
	}
	if st, body := d.call("GET", "/api/v1/vars/v2_runs", d.token, nil, &count); st != 200 || count.Value.String() != "10" {
		t.Errorf("version 2 ran %s messages (%d %s), want the 10 carried", count.Value, st, body)
	}
	var versions []struct{ Version int64 }
	if st, _ := d.call("GET", "/api/v1/flows/v/versions", d.token, nil, &versions); st != 200 || len(versions) != 2 {
		t.Errorf("versions %+v", versions)
	}
	if code, out, errOut := d.ctl(d.token, "flows", "rollback", "v"); code != 0 || !strings.Contains(out, "version 1 running") {
		t.Errorf("qubiqctl flows rollback: %d %s %s", code, out, errOut)
	}
	if code, out, _ := d.ctl(reader, "flows", "list"); code != 0 || !strings.Contains(out, "v     running  1") {
		t.Errorf("qubiqctl flows list: %d\n%s", code, out)
	}
}

// TestFlows_AlarmTriggerUnderItsGrant: an alarm transition reaches a flow
// whose grant reads alarms (the flow writes the alarm's id and new state
// to a tag), while a flow whose prefixes do not cover the alarm's source
// sees none of it.
func TestFlows_AlarmTriggerUnderItsGrant(t *testing.T) {
	d := newDaemon(t, `devices:
  - {name: sim, driver: sim}
tags:
  - {path: A/Level, device: sim, address: memory, type: float64}
  - {path: A/Seen, device: sim, address: memory, type: string}
  - {path: B/Seen, device: sim, address: memory, type: string}
alarms:
  - {name: High, tag: A/Level, mode: above, setpoint: 90, priority: high}
flows:
  - name: on-alarm
    trigger: {alarm: {source: A, to: [active_unacked]}}
    grant: {scopes: [tag:read, tag:write, alarm:read], write_level: operate}
    nodes:
      - id: fmt
        type: python
        next: out
        code: |
            def transform(msg):
                msg["payload"] = msg["alarm"]["id"] + " " + msg["alarm"]["to"]
                return msg
      - {id: out, type: tag_write, path: A/Seen}
  - name: elsewhere
    trigger: {alarm: A}
    grant: {scopes: [tag:read, tag:write, alarm:read], write_level: operate, prefixes: [B]}
    nodes:
      - {id: out, type: tag_write, path: B/Seen, field: alarm.id}
`)
	d.start()
	d.write(d.token, map[string]any{"A/Level": 95.0})
	d.waitFlow(d.token, "on-alarm", 20*time.Second, "the alarm's transition", func(f flowInfo) bool { return f.Counters.Out == 1 })
	var vals []struct {
		Path    string `json:"path"`
		Value   any    `json:"value"`
		Quality string `json:"quality"`
	}
	if st, body := d.call("POST", "/api/v1/tags/read", d.token, map[string]any{"paths": []string{"A/Seen", "B/Seen"}}, &vals); st != 200 {
		t.Fatalf("read: %d %s", st, body)
	}
	if vals[0].Value != "A/Level:High active_unacked" {
		t.Errorf("A/Seen = %v, want the alarm's id and state", vals[0].Value)
	}
	if f := d.flows(d.token)["elsewhere"]; f.Counters.In != 0 || vals[1].Value == "A/Level:High" {
		t.Errorf("a flow whose grant does not cover A got the alarm: %+v, B/Seen=%v", f.Counters, vals[1].Value)
	}
}

// TestFlows_ImportCannotWidenAFlowsGrant: a project import by a designer
// at level operate is refused (403) when a flow in it grants write level
// design, also when that flow would not parse on the checking side (an
// alarm trigger and a Python node); nothing is imported.
func TestFlows_ImportCannotWidenAFlowsGrant(t *testing.T) {
	base := `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Sec/Design, device: sim, address: memory, type: int64, write_level: design}
  - {path: Line1/Level, device: sim, address: memory, type: float64}
alarms:
  - {name: High, tag: Line1/Level, mode: above, setpoint: 90}
`
	d := newDaemon(t, base)
	d.start()
	des := d.apiKey("des", []string{"tag:read", "tag:write", "alarm:read"}, "operate", "designer")
	doc := base + `flows:
  - name: sneaky
    trigger: {alarm: Line1}
    grant: {scopes: [tag:read, tag:write, alarm:read], write_level: design, prefixes: [Line1]}
    nodes:
      - id: p
        type: python
        next: w
        code: |
            def transform(msg):
                msg["payload"] = 4242
                return msg
      - {id: w, type: tag_write, path: Line1/Sec/Design}
`
	req, err := http.NewRequest("POST", d.url+"/api/v1/project/import", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+des)
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "sneaky") {
		t.Fatalf("import of a flow wider than its importer: %d %s, want 403 naming the flow", resp.StatusCode, body)
	}
	if _, ok := d.flows(d.token)["sneaky"]; ok {
		t.Error("the refused import left the flow behind")
	}
}
