//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// wheelPy builds a pure-Python wheel with the standard library only
// (zipfile; the wheel format of PEP 427 with a RECORD of sha256 hashes):
// argv = out_dir, distribution name, version, import name.
const wheelPy = `import base64, hashlib, sys, zipfile, os
out, name, version, mod = sys.argv[1:5]
dist = name.replace("-", "_")
info = f"{dist}-{version}.dist-info"
files = {
    f"{mod}/__init__.py": f"VERSION = {version!r}\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: a test package\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: qubiq-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for p, body in files.items():
    b = body.encode()
    h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    record.append(f"{p},sha256={h},{len(b)}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = "\n".join(record) + "\n"
path = os.path.join(out, f"{dist}-{version}-py3-none-any.whl")
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    for p, body in files.items():
        z.writestr(p, body)
print(path)
`

// buildWheel makes a wheel of name==version (import name mod) in a
// temporary directory and returns its path.
func buildWheel(t *testing.T, name, version, mod string) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", wheelPy, t.TempDir(), name, version, mod).CombinedOutput()
	if err != nil {
		t.Fatalf("build the wheel %s: %v: %s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// loopbackIndex is a PEP 503 simple index on 127.0.0.1 serving the given
// wheels (and an empty project page for pip, which the connectivity check
// asks for). close shuts it, after which its port refuses connections.
type loopbackIndex struct {
	url  string
	srv  *http.Server
	ln   net.Listener
	once sync.Once
}

func startIndex(t *testing.T, wheels map[string]string) *loopbackIndex {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body>\n")
		if whl, ok := wheels[r.PathValue("project")]; ok {
			b, err := os.ReadFile(whl)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			sum := sha256.Sum256(b)
			fmt.Fprintf(w, "<a href=\"/files/%s#sha256=%s\">%s</a>\n", filepath.Base(whl), hex.EncodeToString(sum[:]), filepath.Base(whl))
		} else if r.PathValue("project") != "pip" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "</body></html>\n")
	})
	mux.HandleFunc("GET /files/{file}", func(w http.ResponseWriter, r *http.Request) {
		for _, whl := range wheels {
			if filepath.Base(whl) == r.PathValue("file") {
				http.ServeFile(w, r, whl)
				return
			}
		}
		http.NotFound(w, r)
	})
	ix := &loopbackIndex{url: "http://" + ln.Addr().String() + "/simple", srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() { _ = ix.srv.Serve(ln) }()
	t.Cleanup(ix.close)
	return ix
}

func (ix *loopbackIndex) close() { ix.once.Do(func() { _ = ix.srv.Close() }) }

// consoleProject: a pymodbus device with two holding registers, a
// simulator ramp, and the script the designer edits.
func consoleProject(port int) string {
	return fmt.Sprintf(`devices:
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 300ms, breaker: {timeouts: 2, backoff: 1s}}
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Speed, device: plc1, address: HR0, type: uint16, units: rpm, scan: 250ms}
  - {path: Line1/Temp, device: plc1, address: HR1, type: uint16, scan: 250ms}
  - {path: Line1/Ramp, device: sim, address: "ramp(0,100,10s)", type: float64, scan: 250ms}
scripts:
  - {module: pumps, file: scripts/pumps.py}
`, port)
}

const consolePumpsPy = `@gateway(timeout_ms=3000)
def start(args):
    if not isinstance(args, dict):
        raise ValueError("args must be an object")
    return {"started": args.get("line")}
`

// ensureNodeModules runs npm ci in dir (integration/DIR, pinned by its
// package-lock.json) when playwright-core is not installed there yet. No
// browser download: the tests use Debian's chromium.
func ensureNodeModules(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (make deps-system installs nodejs and npm): %v", err)
	}
	if _, err := os.Stat(filepath.Join(abs, "node_modules", "playwright-core", "package.json")); err == nil {
		return abs
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", abs, err, out)
	}
	return abs
}

// consoleArtifacts is build/test-artifacts/console at the repository root,
// emptied (freshArtifacts).
func consoleArtifacts(t *testing.T) string { return freshArtifacts(t, "console") }

// freshArtifacts empties and returns build/test-artifacts/NAME at the
// repository root, where the browser tests put their screenshots.
func freshArtifacts(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "build", "test-artifacts", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConsole_EndToEnd drives the engineer's console in headless chromium
// (integration/console/e2e.mjs): a sandbox_admin uploads a wheel and sees it
// listed, is warned before installing a package that widens (numpy, from a
// loopback index) and cannot install it without acknowledging, runs the
// connectivity check against the index and, once it is closed, against its
// refusing port; a designer without sandbox_admin is refused the page and
// its forged requests, sees a syntax error at its line before saving, fixes
// it, saves, runs, compares and rolls back; the device table shows the
// pymodbus device go Bad and come back; a users_admin searches the audit log
// and makes and revokes an API key, and is told, in the appliance's words,
// when a key or a user it revokes or disables on a stale page was revoked
// or disabled before. No request leaves the appliance.
func TestConsole_EndToEnd(t *testing.T) {
	chromium := ensureChromium(t)
	e2eDir := ensureNodeModules(t, "console")
	artifacts := consoleArtifacts(t)

	tiny := buildWheel(t, "qubiq-tiny", "1.0", "qubiq_tiny")
	numpy := buildWheel(t, "numpy", "0.0.1", "numpy")
	index := startIndex(t, map[string]string{"numpy": numpy})
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 1450, 1: 61}}})

	d := newDaemon(t, consoleProject(mb.Port))
	cfg, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("python: {"), []byte(fmt.Sprintf("python: {index_url: %q, ", index.url)), 1)
	if err := os.WriteFile(d.cfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "scripts", "pumps.py"), []byte(consolePumpsPy), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start()
	if d.token == "" {
		t.Fatal("no bootstrap token written at first start")
	}
	if st, body := d.call("GET", "/console/", "", nil, nil); st != 200 {
		t.Fatalf("GET /console/: %d %.200s\nthe qubiqd under test has no console bundle: build it with make build (QUBIQ_BIN=bin)", st, body)
	}
	for _, u := range []map[string]any{
		{"name": "sba", "realm": "platform", "permissions": []string{"sandbox_admin"}},
		{"name": "des", "realm": "platform", "permissions": []string{"designer"}},
		{"name": "ua", "realm": "platform", "permissions": []string{"users_admin"}},
		{"name": "op1", "realm": "operator", "level": "operate"},
		{"name": "op2", "realm": "operator", "level": "operate"}, // disabled behind the page's back
	} {
		u["password"] = e2ePassword
		if st, body := d.call("POST", "/api/v1/users", d.token, u, nil); st != 201 {
			t.Fatalf("add user %v: %d %s", u["name"], st, body)
		}
	}

	var staleKey struct {
		ID string `json:"id"`
	} // revoked behind the page's back
	if st, body := d.call("POST", "/api/v1/apikeys", d.token, map[string]any{"name": "stale-e2e", "scopes": []string{"tag:read"}, "write_level": "view"}, &staleKey); st != 201 {
		t.Fatalf("add key stale-e2e: %d %s", st, body)
	}

	cmd := exec.Command("node", "e2e.mjs")
	cmd.Dir = e2eDir
	cmd.Env = append(os.Environ(), "QUBIQ_URL="+d.url, "CHROMIUM="+chromium, "PROFILE_DIR="+t.TempDir(),
		"ARTIFACTS="+artifacts, "PASSWORD="+e2ePassword, "SB_USER=sba", "DES_USER=des", "UA_USER=ua", "OP_USER=op1",
		"WHEEL="+tiny, "WIDEN_REQ=numpy==0.0.1")
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
	var (
		mu         sync.Mutex
		transcript []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			transcript = append(transcript, line)
			mu.Unlock()
			req, ok := strings.CutPrefix(line, "@@ ")
			if !ok {
				continue
			}
			answer := "OK"
			switch req {
			case "stop-modbus":
				mb.Stop()
			case "start-modbus":
				mb.Start()
			case "stop-index":
				index.close()
			case "revoke-stale-key":
				if st, body := d.call("DELETE", "/api/v1/apikeys/"+staleKey.ID, d.token, nil, nil); st != 204 {
					answer = fmt.Sprintf("FAIL revoke: %d %s", st, body)
				}
			case "disable-op2":
				if st, body := d.call("POST", "/api/v1/users/op2/disable", d.token, nil, nil); st != 204 {
					answer = fmt.Sprintf("FAIL disable: %d %s", st, body)
				}
			default:
				answer = "FAIL unknown request " + req
			}
			if _, err := io.WriteString(stdin, answer+"\n"); err != nil {
				return
			}
		}
	}()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	select {
	case err = <-waitErr:
	case <-time.After(8 * time.Minute):
		_ = cmd.Process.Kill()
		err = fmt.Errorf("timed out")
	}
	mu.Lock()
	t.Logf("browser transcript:\n%s", strings.Join(transcript, "\n"))
	mu.Unlock()
	if err != nil {
		t.Fatalf("browser run failed: %v\n%s\nscreenshots in %s", err, stderr.String(), artifacts)
	}

	// What the browser did reached the appliance through the API, audited
	// with the console as origin and the session's principal.
	var recs []struct {
		Principal string `json:"principal"`
		Origin    string `json:"origin"`
		Action    string `json:"action"`
		Target    string `json:"target"`
		Result    string `json:"result"`
		Detail    string `json:"detail"`
	}
	if st, body := d.call("GET", "/api/v1/audit?limit=10000", d.token, nil, &recs); st != 200 {
		t.Fatalf("audit: %d %s", st, body)
	}
	want := map[string]bool{"sba sandbox.package.upload": false, "sba sandbox.package.install": false, "sba sandbox.package.remove": false,
		"des script.save": false, "des script.run": false, "des script.rollback": false, "ua apikey.create": false,
		"ua apikey.revoke": false, "ua user.disable": false, "des refused": false}
	for _, r := range recs {
		k := r.Principal + " " + r.Action
		if _, ok := want[k]; !ok {
			continue
		}
		switch {
		case r.Action == "script.run": // the service records a run with the script as its origin
			want[k] = want[k] || r.Origin == "script:pumps.start"
		case r.Action == "refused":
			want[k] = want[k] || (strings.Contains(r.Target, "/sandbox/") && strings.Contains(r.Detail, "sandbox_admin"))
		default:
			want[k] = want[k] || r.Origin == "console"
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("no audit record %q with origin console (a run: script:pumps.start; a refusal: naming sandbox_admin)", k)
		}
	}
	var pk []struct {
		Name string `json:"name"`
	}
	if st, body := d.call("GET", "/api/v1/sandbox/packages", d.token, nil, &pk); st != 200 {
		t.Fatalf("packages: %d %s", st, body)
	}
	names := fmt.Sprint(pk)
	if !strings.Contains(names, "numpy") || strings.Contains(names, "qubiq-tiny") {
		t.Errorf("installed packages after the run: %s (want numpy, and qubiq-tiny removed)", names)
	}
	shots, _ := filepath.Glob(filepath.Join(artifacts, "*.png"))
	if len(shots) < 15 {
		t.Errorf("%d screenshots in %s, want at least 15", len(shots), artifacts)
	}
}
