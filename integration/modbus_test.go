//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// scan is the scan period of the test tags; the driver timeout is the same,
// so an outage must show within 3 scan periods (issue: walking skeleton).
const scan = 200 * time.Millisecond

func skeletonProject(port int) string {
	return fmt.Sprintf(`devices:
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 200ms}
tags:
  - {path: Plant/F32ABCD, device: plc1, address: HR0, type: float32, scan: 200ms}
  - {path: Plant/F32CDAB, device: plc1, address: HR2, type: float32, byte_order: CDAB, scan: 200ms}
  - {path: Plant/I16, device: plc1, address: HR4, type: int16, scan: 200ms}
  - {path: Plant/U16, device: plc1, address: "40006", type: uint16, scan: 200ms}
  - {path: Plant/I32, device: plc1, address: HR6, type: int32, scan: 200ms}
  - {path: Plant/U32, device: plc1, address: HR8, type: uint32, byte_order: CDAB, scan: 200ms}
  - {path: Plant/SetpointOp, device: plc1, address: HR20, type: int16, write_level: operate, scan: 200ms}
  - {path: Plant/SetpointSup, device: plc1, address: HR21, type: int16, write_level: supervise, scan: 200ms}
`, port)
}

func startSkeleton(t *testing.T) (*peers.Modbus, *daemon) {
	t.Helper()
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{
		0: 0x4148, 1: 0x0000, // float32 ABCD 12.5
		2: 0x0000, 3: 0x4148, // float32 CDAB 12.5
		4: 0xFFFF,            // int16 -1
		5: 0xFFFF,            // uint16 65535 (Modicon 40006)
		6: 0xFFFF, 7: 0xFFFE, // int32 ABCD -2
		8: 0x86A0, 9: 0x0001, // uint32 CDAB 100000
		20: 7, 21: 9,
	}}})
	d := newDaemon(t, skeletonProject(mb.Port))
	d.start()
	if d.token == "" {
		t.Fatal("no bootstrap token written at first start")
	}
	return mb, d
}

func TestSkeleton_ReadsTypesAndByteOrders(t *testing.T) {
	_, d := startSkeleton(t)
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	want := map[string]string{"Plant/F32ABCD": "12.5", "Plant/F32CDAB": "12.5", "Plant/I16": "-1",
		"Plant/U16": "65535", "Plant/I32": "-2", "Plant/U32": "100000"}
	paths := []string{}
	for p := range want {
		paths = append(paths, p)
	}
	waitFor(t, 10*time.Second, "all tags Good with their values", func() (bool, string) {
		got := d.read(reader, paths...)
		for p, w := range want {
			if got[p].Quality != "Good" || got[p].Value.String() != w {
				return false, fmt.Sprintf("%s = %+v, want %s Good", p, got[p], w)
			}
		}
		return true, ""
	})
}

// TestSkeleton_ReadyLogNamesThePages: the start-up line says where the
// operator's panels and the engineer's console are, so a new user reading
// the log knows what to open.
func TestSkeleton_ReadyLogNamesThePages(t *testing.T) {
	_, d := startSkeleton(t)
	// The API answers a moment before the line is written.
	waitFor(t, 10*time.Second, "the ready line", func() (bool, string) {
		return strings.Contains(d.logs(), `msg="qubiqd ready"`), "no ready line yet"
	})
	logs := d.logs()
	for _, want := range []string{"liveview=" + d.url + "/liveview/", "console=" + d.url + "/console/"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the start-up log lacks %s:\n%s", want, logs)
		}
	}
}

func TestSkeleton_WritesAreGated(t *testing.T) {
	mb, d := startSkeleton(t)
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	operator := d.apiKey("operator", []string{"tag:read", "tag:write", "script:execute"}, "operate")

	// A key without tag:write gets 403 and the device is unchanged.
	st, body := d.call("POST", "/api/v1/tags/write", reader, map[string]any{"writes": []map[string]any{{"path": "Plant/SetpointOp", "value": 100}}}, nil)
	if st != 403 || !strings.Contains(string(body), "tag:write") {
		t.Fatalf("write without tag:write: %d %s, want 403 naming tag:write", st, body)
	}
	if got := mb.ReadHR(1, 20, 1)[0]; got != 7 {
		t.Fatalf("HR20 changed to %d by a refused write", got)
	}

	// A gateway script's system.tag.write reaches the device.
	code := `
@gateway(timeout_ms=3000)
def set_both(args):
    return system.tag.write(["Plant/SetpointSup", "Plant/SetpointOp"], [args["sup"], args["op"]])

def read_one(args):
    qv = system.tag.read([args])[0]
    return {"value": qv.value, "quality": qv.quality, "aware": qv.timestamp.tzinfo is not None}
`
	var saved struct {
		Version int `json:"version"`
		Entries []struct {
			Name      string `json:"name"`
			TimeoutMS int    `json:"timeout_ms"`
		} `json:"entries"`
	}
	if st, body := d.call("PUT", "/api/v1/scripts/gate", d.token, map[string]any{"code": code}, &saved); st != 200 {
		t.Fatalf("save script: %d %s", st, body)
	}
	if len(saved.Entries) != 2 || saved.Entries[0].TimeoutMS != 3000 && saved.Entries[1].TimeoutMS != 3000 {
		t.Fatalf("entries %+v: want set_both with timeout_ms 3000", saved.Entries)
	}
	// Run by an operate key: the supervise tag is refused, the operate tag in
	// the same call is written.
	var run struct {
		Result []string `json:"result"`
	}
	st, body = d.call("POST", "/api/v1/scripts/gate/set_both/run", operator, map[string]any{"args": map[string]int{"sup": 111, "op": 222}}, &run)
	if st != 200 {
		t.Fatalf("run: %d %s", st, body)
	}
	if len(run.Result) != 2 || run.Result[0] != "Bad_UserAccessDenied" || run.Result[1] != "Good" {
		t.Fatalf("result %v, want [Bad_UserAccessDenied Good]", run.Result)
	}
	regs := mb.ReadHR(1, 20, 2)
	if regs[0] != 222 {
		t.Fatalf("HR20 = %d on the server, want 222 written by the script", regs[0])
	}
	if regs[1] != 9 {
		t.Fatalf("HR21 = %d on the server: a supervise tag was written by an operate grant", regs[1])
	}
	// The audit log: the refused REST write, the script's refused and
	// written tags (value before and after), and the run itself.
	type rec struct {
		Principal string          `json:"principal"`
		Origin    string          `json:"origin"`
		Action    string          `json:"action"`
		Target    string          `json:"target"`
		Before    json.RawMessage `json:"before"`
		After     json.RawMessage `json:"after"`
		Result    string          `json:"result"`
		Detail    string          `json:"detail"`
	}
	waitFor(t, 5*time.Second, "audit records of the refusal, the writes and the run", func() (bool, string) {
		var recs []rec
		if st, body := d.call("GET", "/api/v1/audit?limit=1000", d.token, nil, &recs); st != 200 {
			return false, string(body)
		}
		var refusedREST, refusedLevel, written, ran int
		for _, r := range recs {
			switch {
			case r.Action == "refused" && r.Principal == "apikey:reader" && strings.Contains(r.Detail, "tag:write"):
				refusedREST++
			case r.Action == "tag.write.refused" && r.Target == "Plant/SetpointSup" && r.Origin == "script:gate.set_both":
				refusedLevel++
			case r.Action == "tag.write" && r.Target == "Plant/SetpointOp" && r.Result == "Good" && string(r.After) == "222" && len(r.Before) > 0:
				written++
			case r.Action == "script.run" && r.Target == "gate.set_both" && r.Principal == "apikey:operator":
				ran++
			}
		}
		return refusedREST == 1 && refusedLevel == 1 && written == 1 && ran == 1,
			fmt.Sprintf("refusedREST=%d refusedLevel=%d written=%d ran=%d of %d records", refusedREST, refusedLevel, written, ran, len(recs))
	})
	var rd struct {
		Result struct {
			Value   json.Number `json:"value"`
			Quality string      `json:"quality"`
			Aware   bool        `json:"aware"`
		} `json:"result"`
	}
	waitFor(t, 5*time.Second, "script reads the written value back", func() (bool, string) {
		st, body := d.call("POST", "/api/v1/scripts/gate/read_one/run", operator, map[string]any{"args": "Plant/SetpointOp"}, &rd)
		return st == 200 && rd.Result.Value.String() == "222" && rd.Result.Quality == "Good" && rd.Result.Aware, string(body)
	})
}

func TestSkeleton_OutageAndRestart(t *testing.T) {
	mb, d := startSkeleton(t)
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	waitFor(t, 10*time.Second, "Good before the outage", func() (bool, string) {
		v := d.read(reader, "Plant/I16")["Plant/I16"]
		return v.Quality == "Good", fmt.Sprint(v)
	})
	mb.Stop()
	stopped := time.Now()
	waitFor(t, 3*scan+time.Second, "Bad within 3 scan periods of the device going away", func() (bool, string) {
		v := d.read(reader, "Plant/I16")["Plant/I16"]
		return strings.HasPrefix(v.Quality, "Bad_"), fmt.Sprint(v)
	})
	t.Logf("Bad after %s", time.Since(stopped).Round(time.Millisecond))
	v := d.read(reader, "Plant/I16")["Plant/I16"]
	if v.Value.String() != "-1" {
		t.Fatalf("bad quality lost the last known value: %+v", v)
	}
	mb.Start()
	waitFor(t, 15*time.Second, "Good again after the device returns, without restarting qubiqd", func() (bool, string) {
		v := d.read(reader, "Plant/I16")["Plant/I16"]
		return v.Quality == "Good", fmt.Sprint(v)
	})

	// Restart qubiqd with the device down: last values are served as
	// Uncertain_LastUsableValue.
	d.stop() // SIGTERM: the engine's Stop persists the last values

	mb.Stop()
	d.start()
	got := d.read(reader, "Plant/I16", "Plant/F32ABCD")
	for p, w := range map[string]string{"Plant/I16": "-1", "Plant/F32ABCD": "12.5"} {
		if got[p].Quality != "Uncertain_LastUsableValue" || got[p].Value.String() != w {
			t.Fatalf("after restart with the device down %s = %+v, want %s Uncertain_LastUsableValue", p, got[p], w)
		}
	}
}

func TestSkeleton_SandboxTimeoutAndAllowList(t *testing.T) {
	_, d := startSkeleton(t)
	operator := d.apiKey("operator", []string{"tag:read", "script:execute"}, "operate")
	loop := "@gateway(timeout_ms=200)\ndef spin(args):\n    while True:\n        pass\n\ndef ok(args):\n    return args\n"
	if st, body := d.call("PUT", "/api/v1/scripts/loop", d.token, map[string]any{"code": loop}, nil); st != 200 {
		t.Fatalf("save: %d %s", st, body)
	}
	st, body := d.call("POST", "/api/v1/scripts/loop/spin/run", operator, map[string]any{"args": nil}, nil)
	var prob struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(body, &prob)
	if st != 504 || prob.Kind != "timeout" {
		t.Fatalf("spinning script: %d %s, want 504 kind timeout", st, body)
	}
	var out struct {
		Result json.Number `json:"result"`
	}
	if st, body := d.call("POST", "/api/v1/scripts/loop/ok/run", operator, map[string]any{"args": 41}, &out); st != 200 || out.Result.String() != "41" {
		t.Fatalf("next script after a timeout: %d %s", st, body)
	}
	if st, _ := d.call("GET", "/api/v1/health", "", nil, nil); st != 200 {
		t.Fatalf("daemon unhealthy after a timeout: %d", st)
	}
	st, body = d.call("PUT", "/api/v1/scripts/bad", d.token, map[string]any{"code": "import os\ndef f(args):\n    return 1\n"}, nil)
	if st != 400 || !strings.Contains(string(body), "allow") {
		t.Fatalf("import os: %d %s, want 400 naming the allow-list", st, body)
	}
}

// TestSkeleton_Qubiqctl drives the CLI against the running daemon.
func TestSkeleton_Qubiqctl(t *testing.T) {
	mb, d := startSkeleton(t)
	ctl := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(bins(t), "qubiqctl"), args...)
		cmd.Env = append(os.Environ(), "QUBIQ_URL="+d.url, "QUBIQ_API_KEY="+d.token)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := ctl("status"); code != 0 || !strings.Contains(out, "plc1") {
		t.Fatalf("status: %d %s", code, out)
	}
	if out, code := ctl("tags", "list"); code != 0 || !strings.Contains(out, "Plant/SetpointOp") {
		t.Fatalf("tags list: %d %s", code, out)
	}
	waitFor(t, 10*time.Second, "qubiqctl tags read shows the value", func() (bool, string) {
		out, code := ctl("tags", "read", "Plant/I16")
		return code == 0 && strings.Contains(out, "-1") && strings.Contains(out, "Good"), out
	})
	if out, code := ctl("tags", "write", "Plant/SetpointOp=321"); code != 0 || !strings.Contains(out, "Good") {
		t.Fatalf("tags write: %d %s", code, out)
	}
	if got := mb.ReadHR(1, 20, 1)[0]; got != 321 {
		t.Fatalf("HR20 = %d after qubiqctl tags write 321", got)
	}
	f := filepath.Join(t.TempDir(), "hello.py")
	os.WriteFile(f, []byte("def hi(args):\n    return {'hello': args}\n"), 0o644)
	if out, code := ctl("scripts", "push", "hello", f); code != 0 {
		t.Fatalf("scripts push: %d %s", code, out)
	}
	if out, code := ctl("--json", "scripts", "run", "hello.hi", "--args", `"plant"`); code != 0 || !strings.Contains(out, `"hello"`) || !strings.Contains(out, "plant") {
		t.Fatalf("scripts run: %d %s", code, out)
	}
	// An unknown module is 404 naming it, for a run as for a rollback.
	if out, code := ctl("scripts", "run", "nomod.hi"); code != 1 || !strings.Contains(out, `unknown module "nomod" (HTTP 404, not_found)`) {
		t.Fatalf("scripts run of an unknown module: %d %s, want exit 1 and a 404 naming the module", code, out)
	}
	for _, p := range []string{"/api/v1/scripts/nomod/hi/run", "/api/v1/scripts/nomod/rollback"} {
		if st, body := d.call("POST", p, d.token, nil, nil); st != 404 || !strings.Contains(string(body), `unknown module \"nomod\"`) {
			t.Errorf("POST %s: %d %s, want 404 naming the module", p, st, body)
		}
	}
	// The request plan: HR0..HR9 and HR20..HR21 bridge a gap of 10 (max_gap
	// 16), so one FC3 request of 22 registers serves every tag.
	var plan []struct {
		FunctionCode int      `json:"function_code"`
		Start        int      `json:"start"`
		Count        int      `json:"count"`
		Tags         []string `json:"tags"`
	}
	out, code := ctl("--json", "devices", "plan", "plc1")
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil || len(plan) != 1 || plan[0].FunctionCode != 3 || plan[0].Start != 0 || plan[0].Count != 22 || len(plan[0].Tags) != 8 {
		t.Fatalf("devices plan: %d %s", code, out)
	}
	if _, code := ctl("tags", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand exit %d, want 2", code)
	}
	if _, code := ctl("--api-key", "qbq_0000000000000000_nope", "tags", "list"); code != 1 {
		t.Fatalf("bad key exit %d, want 1", code)
	}
}

// TestSkeleton_SecondInstanceRefused: a second qubiqd on the same data dir
// exits within the store open timeout with a clear message instead of waiting
// forever on the file lock (docs/config.md, "store").
func TestSkeleton_SecondInstanceRefused(t *testing.T) {
	_, d := startSkeleton(t)
	start := time.Now()
	cmd := exec.Command(filepath.Join(bins(t), "qubiqd"), "--config", d.cfg)
	cmd.Env = append(os.Environ(), d.env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second instance exited 0: %s", out)
	}
	if !strings.Contains(string(out), "database is in use by another process") {
		t.Fatalf("second instance message: %s", out)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("second instance took %s to give up (open_timeout 2s)", el)
	}
	if st, _ := d.call("GET", "/api/v1/health", "", nil, nil); st != 200 {
		t.Fatal("first instance affected")
	}
}
