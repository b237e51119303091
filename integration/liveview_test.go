//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// liveviewProject: a simulator with a live ramp, an operate setpoint, a
// supervise limit, a run flag, an int16 counter (a write outside int16 is
// refused by the server); a Modbus device on a closed port (its tags are
// Bad_NotConnected, never had a value); a second Modbus device (plc2,
// tcp://127.0.0.1:PLC2_PORT: a pymodbus server the test starts and stops);
// three alarms (high at operate, critical at supervise, one out of service);
// a script whose `chain` entry calls system.script.runOnGateway (needs
// script:execute); one panel with a button bar, a trend backed by history
// (seeded over 24 h by the test) and an alarm list.
const liveviewProject = `devices:
  - {name: sim, driver: sim}
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:1", timeout: 300ms}
  - {name: plc2, driver: modbus, url: "tcp://127.0.0.1:PLC2_PORT", timeout: 300ms}
tags:
  - {path: Line1/Speed, device: sim, address: "ramp(0,100,4s)", type: float64, units: rpm, scan: 200ms, history: {enabled: true}}
  - {path: Line1/Setpoint, device: sim, address: memory, type: float64, units: rpm, write_level: operate, scan: 200ms, history: {enabled: true}}
  - {path: Line1/Limit, device: sim, address: memory, type: float64, units: rpm, write_level: supervise, scan: 200ms}
  - {path: Line1/Run, device: sim, address: memory, type: bool, scan: 200ms, description: Pump running, history: {enabled: true}}
  - {path: Line1/Count, device: sim, address: memory, type: int16, scan: 200ms}
  - {path: Line1/Level, device: sim, address: memory, type: float64, units: "%", scan: 200ms}
  - {path: Line1/Temp, device: sim, address: memory, type: float64, units: degC, scan: 200ms}
  - {path: Line1/Pressure, device: plc1, address: HR0, type: float32, units: bar, scan: 500ms}
  - {path: Line1/Valve, device: plc1, address: HR2, type: float32, units: "%", scan: 500ms}
  - {path: Line1/Flow, device: plc2, address: HR0, type: uint16, units: m3/h, scan: 300ms}
alarms:
  - {name: High, tag: Line1/Level, mode: above, setpoint: 80, priority: high, display_path: Tank 1 high level, message: "Tank level high: {value:.0f} {units}"}
  - {name: Hot, tag: Line1/Temp, mode: above, setpoint: 90, priority: critical, ack_level: supervise, display_path: Reactor temperature, message: "Reactor hot: {value:.0f} {units}"}
  - {name: Low, tag: Line1/Level, mode: below, setpoint: 10, priority: low, out_of_service: true}
scripts:
  - {module: pumps, file: scripts/pumps.py, liveview: [start, chain]}
  - {module: helper, file: scripts/helper.py}
views:
  - name: pump1
    title: Pump 1
    events: 30
    widgets:
      - {type: value, tag: Line1/Speed, label: Speed, decimals: 1}
      - {type: numeric, tag: Line1/Setpoint, label: Setpoint, min: 0, max: 100, step: 0.5}
      - {type: numeric, tag: Line1/Limit, label: Limit}
      - {type: boolean, tag: Line1/Run, label: Run, on_label: Running, off_label: Stopped}
      - {type: numeric, tag: Line1/Count, label: Count}
      - {type: value, tag: Line1/Pressure, label: Pressure}
      - {type: numeric, tag: Line1/Valve, label: Valve}
      - {type: numeric, tag: Line1/Flow, label: Flow}
      - {type: button, label: Start, entry: pumps.start, args: {line: 1}, confirm: "Start pump 1?"}
      - {type: button, label: Chain, entry: pumps.chain}
      - {type: trend, tags: [Line1/Speed, Line1/Setpoint, Line1/Run], label: Speed, window: 1m}
  - name: line1
    title: Line 1
    events: 0
    widgets:
      - {type: value, tag: Line1/Level, label: Level, decimals: 0, buttons: [{label: Start pump, entry: pumps.start, args: {line: 1}}]}
      - {type: buttons, label: Line 1, buttons: [{label: Chain, entry: pumps.chain}]}
      - {type: alarms, prefix: Line1, label: Line 1 alarms, limit: 5}
`

const pumpsPy = `@gateway(timeout_ms=5000)
def start(args):
    status = system.tag.write(["Line1/Run"], [True])[0]
    return {"message": "Pump %d started" % args["line"], "status": status}


@gateway(timeout_ms=5000)
def chain(args):
    return system.script.runOnGateway("helper.ping", {"from": "panel"})
`

const helperPy = `@gateway(timeout_ms=5000)
def ping(args):
    return {"pong": True}
`

const e2ePassword = "panel-pass-1"

// ensureChromium returns Debian's chromium, installing it when missing
// (scripts/ensure-deps.sh). A machine that cannot install it fails the test: never a skip.
func ensureChromium(t *testing.T) string {
	t.Helper()
	const bin = "/usr/bin/chromium"
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Log("installing Debian chromium")
	for _, args := range [][]string{{"apt-get", "update", "-qq"}, {"apt-get", "install", "-y", "-qq", "chromium"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("chromium installed but %s is missing: %v", bin, err)
	}
	return bin
}

// ensurePlaywright installs playwright-core (pinned in
// liveview/package-lock.json) into liveview/node_modules and returns the
// directory (ensureNodeModules). No browser download: the test uses
// Debian's chromium.
func ensurePlaywright(t *testing.T) string { return ensureNodeModules(t, "liveview") }

// artifactsDir is build/test-artifacts/liveview at the repository root,
// emptied (freshArtifacts).
func artifactsDir(t *testing.T) string { return freshArtifacts(t, "liveview") }

// liveviewProjectFor is liveviewProject with plc2 on 127.0.0.1:plc2Port.
func liveviewProjectFor(plc2Port int) string {
	return strings.Replace(liveviewProject, "PLC2_PORT", strconv.Itoa(plc2Port), 1)
}

func startLiveViewDaemon(t *testing.T, plc2Port int, env ...string) *daemon {
	t.Helper()
	d := newDaemon(t, liveviewProjectFor(plc2Port), env...)
	if err := os.MkdirAll(filepath.Join(d.dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, code := range map[string]string{"pumps.py": pumpsPy, "helper.py": helperPy} {
		if err := os.WriteFile(filepath.Join(d.dir, "scripts", name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.start()
	if d.token == "" {
		t.Fatal("no bootstrap token written at first start")
	}
	return d
}

// qubiqctl runs the CLI against d and returns its stdout; a non-zero exit
// fails the test.
func (d *daemon) qubiqctl(token string, args ...string) string {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(bins(d.t), "qubiqctl"), append([]string{"--url", d.url, "--api-key", token}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		d.t.Fatalf("qubiqctl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// session is a browser session driven over plain HTTP.
type session struct {
	d      *daemon
	cookie *http.Cookie
	csrf   string
}

func (d *daemon) login(user, password string) (*session, int) {
	d.t.Helper()
	b, _ := json.Marshal(map[string]string{"user": user, "password": password})
	resp, err := http.Post(d.url+"/api/v1/auth/login", "application/json", bytes.NewReader(b))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var si struct {
		CSRF string `json:"csrf_token"`
	}
	if resp.StatusCode != 200 {
		return nil, resp.StatusCode
	}
	if err := json.NewDecoder(resp.Body).Decode(&si); err != nil {
		d.t.Fatal(err)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "qubiq_session" {
			return &session{d: d, cookie: c, csrf: si.CSRF}, 200
		}
	}
	d.t.Fatalf("login %s set no session cookie", user)
	return nil, 0
}

func (s *session) do(method, path, contentType, body string, hdr map[string]string) (int, string) {
	s.d.t.Helper()
	req, err := http.NewRequest(method, s.d.url+path, strings.NewReader(body))
	if err != nil {
		s.d.t.Fatal(err)
	}
	req.AddCookie(s.cookie)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.d.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

type panelEvent struct {
	Principal string          `json:"principal"`
	Action    string          `json:"action"`
	Target    string          `json:"target"`
	Result    string          `json:"result"`
	Detail    string          `json:"detail"`
	After     json.RawMessage `json:"after"`
}

func (d *daemon) panelEvents(token string) []panelEvent {
	d.t.Helper()
	var evs []panelEvent
	if st, raw := d.call("GET", "/api/v1/liveview/views/pump1/events", token, nil, &evs); st != 200 {
		d.t.Fatalf("panel events: %d %s", st, raw)
	}
	return evs
}

// TestLiveView_PanelEndToEnd drives the panel in headless chromium at
// 1280×800 and checks the DOM (classes, disabled state, text; the
// screenshots in build/test-artifacts/liveview are for people): an
// operator at operate sees live values calm, writes a setpoint that reaches
// the simulator, is refused a write outside int16 in words, finds the
// supervise control read-only (a forged request is refused), sees a Bad
// Modbus device dimmed and struck with its controls off and the reason in
// words, is refused script:execute for a nested runOnGateway, presses a
// button whose script's message is the toast, switches a bool both ways,
// reads a day of history in the trend (time axis, rounded labels, legend by
// name, steps) whose window survives a tab switch and a reload, sees two
// alarms in the banner by priority, acknowledges the one at its level and
// finds the other read-only naming the level; the link is cut (values
// stale, controls off, no countdown) and comes back; the session ends on
// the server and no trace of it survives the next login; a view-level
// operator may not acknowledge; a supervise operator presses, acknowledges
// and shelves (shown calmly). Users are made with qubiqctl, then the
// appliance is provisioned.
func TestLiveView_PanelEndToEnd(t *testing.T) {
	chromium := ensureChromium(t)
	e2eDir := ensurePlaywright(t)
	artifacts := artifactsDir(t)
	plc2 := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 125}}})
	d := startLiveViewDaemon(t, plc2.Port)

	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(e2ePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.qubiqctl(d.token, "users", "add", "--name", "op1", "--realm", "operator", "--level", "operate", "--password-file", pwFile)
	d.qubiqctl(d.token, "users", "add", "--name", "sup1", "--realm", "operator", "--level", "supervise", "--password-file", pwFile)
	d.qubiqctl(d.token, "users", "add", "--name", "view1", "--realm", "operator", "--level", "view", "--password-file", pwFile)
	if out := d.qubiqctl(d.token, "users", "list"); !strings.Contains(out, "op1") || !strings.Contains(out, "supervise") {
		t.Fatalf("users list:\n%s", out)
	}
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	writer := d.apiKey("writer", []string{"tag:read", "tag:write"}, "design")
	d.qubiqctl(d.token, "provision", "--password-file", pwFile)
	if st, _ := d.call("GET", "/api/v1/users", d.token, nil, nil); st != 401 {
		t.Fatalf("bootstrap token after provision: %d, want 401", st)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "data", "bootstrap-token")); !os.IsNotExist(err) {
		t.Errorf("bootstrap-token file left after provision: %v", err)
	}
	admin, st := d.login("admin", e2ePassword)
	if st != 200 {
		t.Fatalf("admin login after provision: %d", st)
	}
	if code, body := admin.do("GET", "/api/v1/users", "", "", nil); code != 200 || !strings.Contains(body, `"sup1"`) {
		t.Fatalf("admin session lists users: %d %s", code, body)
	}

	// CSRF: a cross-site form post with the operator's cookie is refused,
	// nothing written.
	op, _ := d.login("op1", e2ePassword)
	code, body := op.do("POST", "/api/v1/tags/write", "application/x-www-form-urlencoded", "writes=Line1%2FSetpoint",
		map[string]string{"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"})
	if code != 403 || !strings.Contains(body, `"kind":"csrf"`) {
		t.Fatalf("cross-site form post: %d %s", code, body)
	}
	code, body = op.do("POST", "/api/v1/tags/write", "text/plain", `{"writes":[{"path":"Line1/Setpoint","value":7}]}`,
		map[string]string{"Origin": "http://attacker.example"})
	if code != 403 {
		t.Fatalf("cross-site text/plain post: %d %s", code, body)
	}
	if v := d.read(reader, "Line1/Setpoint")["Line1/Setpoint"]; v.Value.String() != "0" {
		t.Fatalf("a refused cross-site post wrote the setpoint: %+v", v)
	}

	// A day of history for the long trend, written while the daemon is stopped.
	d.stop()
	seedHistory(t, d)
	d.start()

	// The browser run.
	cmd := exec.Command("node", "e2e.mjs")
	cmd.Dir = e2eDir
	cmd.Env = append(os.Environ(), "QUBIQ_URL="+d.url, "CHROMIUM="+chromium, "PROFILE_DIR="+t.TempDir(),
		"ARTIFACTS="+artifacts, "OP_USER=op1", "SUP_USER=sup1", "VIEW_USER=view1", "PASSWORD="+e2ePassword)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var transcript []string
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			transcript = append(transcript, line)
			mu.Unlock()
			cmdLine, ok := strings.CutPrefix(line, "@@ ")
			if !ok {
				continue
			}
			answer := e2eAnswer(t, d, plc2, reader, writer, strings.Fields(cmdLine))
			if _, err := io.WriteString(stdin, answer+"\n"); err != nil {
				return
			}
		}
	}()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	select {
	case err = <-waitErr:
	case <-time.After(4 * time.Minute):
		_ = cmd.Process.Kill()
		err = fmt.Errorf("timed out")
	}
	mu.Lock()
	t.Logf("browser transcript:\n%s", strings.Join(transcript, "\n"))
	mu.Unlock()
	if err != nil {
		t.Fatalf("browser run failed: %v\n%s\nscreenshots in %s", err, stderr.String(), artifacts)
	}

	// The audit trail of the panel: who pressed what, the grant, the writes.
	evs := d.panelEvents(reader)
	var refusedPress, okPress, setpoint bool
	for _, e := range evs {
		switch {
		case e.Action == "liveview.press" && e.Principal == "op1" && e.Target == "pumps.chain":
			refusedPress = e.Result == "permission_denied" && strings.Contains(e.Detail, "script:execute") &&
				strings.Contains(string(e.After), `"write_level":"operate"`) && strings.Contains(string(e.After), `"escape_hatch":false`)
		case e.Action == "liveview.press" && e.Principal == "sup1" && e.Target == "pumps.chain":
			okPress = e.Result == "ok" && strings.Contains(string(e.After), `"script:execute"`)
		case e.Action == "tag.write" && e.Principal == "op1" && e.Target == "Line1/Setpoint":
			setpoint = e.Result == "Good" && strings.Contains(string(e.After), "42.5")
		}
	}
	if !refusedPress || !okPress || !setpoint {
		b, _ := json.MarshalIndent(evs, "", "  ")
		t.Fatalf("panel audit trail incomplete (refused press %v, supervise press %v, setpoint write %v):\n%s", refusedPress, okPress, setpoint, b)
	}
	shots, _ := filepath.Glob(filepath.Join(artifacts, "*.png"))
	for _, want := range []string{"bad-device", "write-refused", "long-trend", "alarm-active", "alarm-acked", "link-down-stale"} {
		if m, _ := filepath.Glob(filepath.Join(artifacts, "*-"+want+".png")); len(m) != 1 {
			t.Errorf("no screenshot %s in %s (have %d)", want, artifacts, len(shots))
		}
	}
}

// e2eAnswer serves one request of the browser script.
func e2eAnswer(t *testing.T, d *daemon, plc2 *peers.Modbus, reader, writer string, f []string) string {
	switch {
	case len(f) == 2 && f[0] == "plc2" && f[1] == "stop":
		plc2.Stop()
		return "OK"
	case len(f) == 3 && f[0] == "write":
		n, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return "FAIL bad value " + f[2]
		}
		var res []struct {
			Status string `json:"status"`
			Reason string `json:"reason"`
		}
		st, raw := d.call("POST", "/api/v1/tags/write", writer, map[string]any{"writes": []map[string]any{{"path": f[1], "value": n}}}, &res)
		if st != 200 || len(res) != 1 || res[0].Status != "Good" {
			return fmt.Sprintf("FAIL write %s: %d %s", f[1], st, raw)
		}
		return "OK"
	case len(f) == 3 && f[0] == "readback":
		want, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return "FAIL bad value " + f[2]
		}
		deadline := time.Now().Add(5 * time.Second)
		var last tagValue
		for time.Now().Before(deadline) {
			last = d.read(reader, f[1])[f[1]]
			if got, err := last.Value.Float64(); err == nil && got == want && last.Quality == "Good" {
				return "OK"
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Sprintf("FAIL %s reads %s (%s), want %s", f[1], last.Value, last.Quality, f[2])
	case len(f) == 1 && f[0] == "stop":
		d.stop()
		return "OK"
	case len(f) == 1 && f[0] == "start":
		d.start()
		return "OK"
	}
	return "FAIL unknown request " + strings.Join(f, " ")
}

// TestLiveView_EscapeHatchVisibleAndAudited: QUBIQ_BROWSER_SCRIPT_SCOPES=off
// is logged at start-up, shown in health, and every panel run it widens is
// audited as such.
func TestLiveView_EscapeHatchVisibleAndAudited(t *testing.T) {
	d := startLiveViewDaemon(t, peers.FreePort(t), "QUBIQ_BROWSER_SCRIPT_SCOPES=off")
	var h struct {
		EscapeHatch bool `json:"escape_hatch"`
	}
	if st, raw := d.call("GET", "/api/v1/health", "", nil, &h); (st != 200 && st != 503) || !h.EscapeHatch {
		t.Fatalf("health: %d %s", st, raw)
	}
	if !strings.Contains(d.logs(), "escape hatch on") {
		t.Fatalf("no start-up warning in the log:\n%s", d.logs())
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(e2ePassword), 0o600); err != nil {
		t.Fatal(err)
	}
	d.qubiqctl(d.token, "users", "add", "--name", "op1", "--realm", "operator", "--level", "operate", "--password-file", pwFile)
	op, st := d.login("op1", e2ePassword)
	if st != 200 {
		t.Fatalf("login: %d", st)
	}
	code, body := op.do("POST", "/api/v1/scripts/pumps/chain/run", "", "", map[string]string{"X-CSRF-Token": op.csrf, "X-Qubiq-Panel": "pump1"})
	if strings.Contains(body, "script:execute") {
		t.Fatalf("the escape hatch did not widen the run: %d %s", code, body)
	}
	// Direct writes from the panel keep the operator's level.
	code, body = op.do("POST", "/api/v1/tags/write", "application/json", `{"writes":[{"path":"Line1/Limit","value":3}]}`,
		map[string]string{"X-CSRF-Token": op.csrf, "X-Qubiq-Panel": "pump1"})
	if code != 200 || !strings.Contains(body, "Bad_UserAccessDenied") {
		t.Fatalf("panel write of a supervise tag under the hatch: %d %s", code, body)
	}
	evs := d.panelEvents(d.token)
	found := false
	for _, e := range evs {
		if e.Action == "liveview.press" && strings.Contains(string(e.After), `"escape_hatch":true`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit record of the widened run: %+v", evs)
	}
}

// TestLiveView_TLSAuto: http.tls auto makes a self-signed certificate on
// first start, logs its fingerprint and reports it in health; the browser
// session cookie is then __Host- prefixed and Secure; a restart keeps the
// certificate.
func TestLiveView_TLSAuto(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport)
	old := tr.TLSClientConfig
	// The certificate is checked below by its fingerprint (pinning), as a
	// technician compares it with the daemon's log.
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	t.Cleanup(func() { tr.TLSClientConfig = old; tr.CloseIdleConnections() })

	d := newDaemon(t, liveviewProjectFor(peers.FreePort(t)))
	cfg, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte(`http: {listen: "`), []byte(`http: {tls: auto, listen: "`), 1)
	if err := os.WriteFile(d.cfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, code := range map[string]string{"pumps.py": pumpsPy, "helper.py": helperPy} {
		if err := os.WriteFile(filepath.Join(d.dir, "scripts", name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.url = strings.Replace(d.url, "http://", "https://", 1)
	d.start()

	fingerprint := func() (presented, reported string) {
		resp, err := http.Get(d.url + "/api/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct {
			TLS struct {
				Mode        string `json:"mode"`
				Fingerprint string `json:"fingerprint_sha256"`
			} `json:"tls"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.TLS.Mode != "auto" {
			t.Fatalf("health tls: %+v %v", h, err)
		}
		sum := sha256.Sum256(resp.TLS.PeerCertificates[0].Raw)
		parts := make([]string, len(sum))
		for i, b := range sum {
			parts[i] = fmt.Sprintf("%02X", b)
		}
		return strings.Join(parts, ":"), h.TLS.Fingerprint
	}
	got, want := fingerprint()
	if got != want {
		t.Fatalf("presented certificate %s, health says %s", got, want)
	}
	if !strings.Contains(d.logs(), want) {
		t.Fatalf("fingerprint %s not in the log", want)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "data", "tls", "cert.pem")); err != nil {
		t.Fatal(err)
	}
	if out := d.qubiqctl(d.token, "--tls-fingerprint", got, "status"); !strings.Contains(out, got) {
		t.Fatalf("qubiqctl status does not show the fingerprint:\n%s", out)
	}
	d.qubiqctl(d.token, "--tls-fingerprint", got, "users", "add", "--name", "op1", "--realm", "operator", "--level", "operate",
		"--password-file", writeTemp(t, e2ePassword))
	resp, err := http.Post(d.url+"/api/v1/auth/login", "application/json", strings.NewReader(`{"user":"op1","password":"`+e2ePassword+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var c *http.Cookie
	for _, x := range resp.Cookies() {
		c = x
	}
	if resp.StatusCode != 200 || c == nil || c.Name != "__Host-qubiq_session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login over https: %d cookie %+v", resp.StatusCode, c)
	}
	d.stop()
	d.start()
	if again, _ := fingerprint(); again != got {
		t.Fatalf("certificate changed on restart: %s → %s", got, again)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
