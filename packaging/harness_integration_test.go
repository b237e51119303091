//go:build integration

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/store"
)

// The flash harness stands in for systemd: it runs qubiq-slot boot (the
// unit's ExecStartPre) and then the daemon from current, again and again,
// as Restart=on-failure with RestartForceExitStatus=75 would, until the
// daemon exits 0 or the start limit is reached.
//
// Every healthy version's daemon is the real qubiqd (built with its
// version), configured through the daemon config's firmware section (slots
// root, trusted keys, the trial's confirm_after and timeout). A firmware
// that never becomes healthy, or that migrates the store to a schema the
// others do not know, is the stand-in (packaging/standin): a broken
// release is what it stands for. QUBIQ_HARNESS_DAEMON=standin runs the
// stand-in for every version.
type harness struct {
	t                 *testing.T
	dir, root, data   string
	keys, cfg, agent  string
	url               string
	key               *firmware.SigningKey
	env               []string
	mu                sync.Mutex
	starts, bootFails int
	log               bytes.Buffer
	stopped           chan struct{}
	stopReq           chan struct{}
	stopOnce          sync.Once
	cur               *exec.Cmd
	trees             map[string]string
	keyFiles          map[*firmware.SigningKey]string
	// agentKills, when set, are power cuts during ExecStartPre: the next
	// starts' qubiq-slot boot is killed (SIGKILL) after each duration in
	// turn, and the loop goes on as a reboot would.
	agentKills  []time.Duration
	agentKilled int
	// notes are the datagrams the daemons sent to NOTIFY_SOCKET, in order.
	notes []string
}

const startLimit = 20

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, root: filepath.Join(dir, "usr/lib/qubiq"), data: filepath.Join(dir, "var/lib/qubiq"),
		keys: filepath.Join(dir, "etc/trusted-firmware-keys"), cfg: filepath.Join(dir, "etc/qubiq.yaml"),
		stopped: make(chan struct{}), stopReq: make(chan struct{}), trees: map[string]string{}, keyFiles: map[*firmware.SigningKey]string{}}
	for _, d := range []string{filepath.Join(h.root, "slots"), h.data, filepath.Join(dir, "etc")} {
		os.MkdirAll(d, 0o755)
	}
	priv, pub, _ := firmware.Keygen("release", nil)
	h.key, _ = firmware.ParseSigningKey(priv)
	os.WriteFile(h.keys, pub, 0o644)
	port := freePort(t)
	h.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	os.WriteFile(h.cfg, []byte(fmt.Sprintf("appliance_id: harness\ndata_dir: %s\nhttp: {listen: \"127.0.0.1:%d\"}\n"+
		"python: {path: %s/current/python/bin/python3, replicas: 1}\nstore: {open_timeout: 2s}\n"+
		"firmware: {slots_root: %s, trusted_keys: %s, confirm_after: 300ms, trial_timeout: 20s}\n",
		h.data, port, h.root, h.root, h.keys)), 0o644)
	h.agent = filepath.Join(dir, "qubiq-slot")
	gobuild(t, h.agent, "./cmd/qubiq-slot")
	sock := filepath.Join(dir, "n")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			h.mu.Lock()
			h.notes = append(h.notes, string(buf[:n]))
			h.mu.Unlock()
		}
	}()
	h.env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "QUBIQ_SLOTS_ROOT="+h.root, "QUBIQ_TRUSTED_KEYS="+h.keys,
		"QUBIQ_CONFIRM_AFTER=300ms", "QUBIQ_TRIAL_TIMEOUT=1500ms", "PYTHON_PATH="+h.root+"/current/python/bin/python3")
	return h
}

func gobuild(t *testing.T, out, pkg string, ldflags ...string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-ldflags", strings.Join(ldflags, " "), "-o", out, pkg)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// slotTree makes a slot tree for version whose daemon is the stand-in
// (healthy or not, store schema 1 or 2), or the real qubiqd.
func (h *harness) slotTree(version string, healthy bool, schema int) string {
	h.t.Helper()
	id := fmt.Sprintf("%s-%v-%d", version, healthy, schema)
	if tree, ok := h.trees[id]; ok {
		return tree
	}
	tree := filepath.Join(h.dir, "trees", id)
	h.trees[id] = tree
	os.MkdirAll(filepath.Join(tree, "bin"), 0o755)
	os.MkdirAll(filepath.Join(tree, "python", "bin"), 0o755)
	if os.Getenv("QUBIQ_HARNESS_DAEMON") != "standin" && healthy && schema == 1 {
		gobuild(h.t, filepath.Join(tree, "bin", "qubiqd"), "./cmd/qubiqd", "-X qubiq.dev/edge/daemon.Version="+version)
		// The slot's runtime stands in for the private one: the system's
		// interpreter, started from inside the slot (a link out of the slot
		// is refused by the bundle's manifest).
		os.WriteFile(filepath.Join(tree, "python", "bin", "python3"), []byte("#!/bin/sh\nexec /usr/bin/python3.11 \"$@\"\n"), 0o755)
	} else {
		yes := map[bool]string{true: "yes", false: "no"}[healthy]
		gobuild(h.t, filepath.Join(tree, "bin", "qubiqd"), "./packaging/standin", "-s -w",
			"-X main.version="+version, "-X main.healthy="+yes, fmt.Sprintf("-X main.schema=%d", schema))
		os.WriteFile(filepath.Join(tree, "python", "bin", "python3"), []byte("#!/bin/sh\n"), 0o755)
	}
	os.WriteFile(filepath.Join(tree, "bin", "qubiqctl"), []byte("#!/bin/sh\n"), 0o755)
	return tree
}

// install puts version into slot a as the package's postinst does.
func (h *harness) install(version string) {
	h.t.Helper()
	tree := h.slotTree(version, true, 1)
	mustRun(h.t, "cp", "-a", tree, filepath.Join(h.root, "slots", "a"))
	_, raw, err := firmware.SlotManifest(firmware.BuildOptions{SlotDir: filepath.Join(h.root, "slots", "a"), Version: version, Arch: runtime.GOARCH, SchemaVersion: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(h.root, "slots", "a", slots.ManifestFile), raw, 0o644)
	mustRun(h.t, h.agent, "activate", "--root", h.root, "--data-dir", h.data, "a")
}

// bundle builds a signed bundle with `go run ./packaging bundle`, as
// `make bundle` does (in its own process: this test binary runs under the
// race detector, which makes compression slow).
func (h *harness) bundle(version, arch string, healthy bool, schema int, key *firmware.SigningKey) []byte {
	h.t.Helper()
	kf, ok := h.keyFiles[key]
	if !ok {
		kf = filepath.Join(h.dir, fmt.Sprintf("key-%d", len(h.keyFiles)))
		os.WriteFile(kf, fmt.Appendf(nil, "qubiq-firmware-private-key %s %s\n", key.Name, base64.StdEncoding.EncodeToString(key.Key.Seed())), 0o600)
		h.keyFiles[key] = kf
	}
	out := filepath.Join(h.dir, "bundles", fmt.Sprintf("%s-%s-%v-%d-%d", version, arch, healthy, schema, len(h.keyFiles)))
	cmd := exec.Command("go", "run", "./packaging", "bundle", "--slot", h.slotTree(version, healthy, schema), "--version", version,
		"--arch", arch, "--schema", fmt.Sprint(schema), "--key", kf, "--out", out)
	cmd.Dir = ".."
	b, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("bundle %s: %v\n%s", version, err, b)
	}
	data, err := os.ReadFile(strings.TrimSpace(string(b)))
	if err != nil {
		h.t.Fatal(err)
	}
	return data
}

// run is the unit's restart loop.
func (h *harness) run() {
	defer close(h.stopped)
	for {
		h.mu.Lock()
		h.starts++
		n := h.starts
		h.mu.Unlock()
		if n > startLimit {
			h.logf("start limit hit")
			return
		}
		h.mu.Lock()
		var cut time.Duration
		if len(h.agentKills) > 0 {
			cut, h.agentKills = h.agentKills[0], h.agentKills[1:]
		}
		h.mu.Unlock()
		agent := exec.Command(h.agent, "boot", "--root", h.root, "--data-dir", h.data, "--trusted-keys", h.keys)
		var aout bytes.Buffer
		agent.Stdout, agent.Stderr = &aout, &aout
		if cut > 0 {
			if err := agent.Start(); err != nil {
				h.logf("start %d: %v", n, err)
				return
			}
			timer := time.AfterFunc(cut, func() { agent.Process.Kill() })
			err := agent.Wait()
			killed := !timer.Stop()
			h.logf("start %d: qubiq-slot boot, power cut after %s (killed: %v): %v\n%s", n, cut, killed, err, aout.String())
			if killed {
				h.mu.Lock()
				h.agentKilled++
				h.mu.Unlock()
				continue // the power comes back: the next start runs ExecStartPre again
			}
		}
		var err error
		if cut == 0 {
			err = agent.Run()
		}
		out := aout.String()
		h.logf("start %d: qubiq-slot boot: %v\n%s", n, err, out)
		if err != nil {
			h.mu.Lock()
			h.bootFails++
			h.mu.Unlock()
			if h.wait(100 * time.Millisecond) {
				return
			}
			continue
		}
		cmd := exec.Command(filepath.Join(h.root, "current", "bin", "qubiqd"), "--config", h.cfg)
		cmd.Env = h.env
		var dout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &dout, &dout
		if err := cmd.Start(); err != nil {
			h.logf("start %d: %v", n, err)
			return
		}
		h.mu.Lock()
		h.cur = cmd
		h.mu.Unlock()
		err = cmd.Wait()
		h.logf("start %d: daemon exited: %v\n%s", n, err, dout.String())
		var ee *exec.ExitError
		if err == nil || (errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM) {
			return // a clean stop: Restart=on-failure does not restart
		}
		// A kill -9 (a crash, the watchdog) is restarted like a failure.
		if h.wait(100 * time.Millisecond) { // RestartSec
			return
		}
	}
}

func (h *harness) wait(d time.Duration) bool {
	select {
	case <-h.stopReq:
		return true
	case <-time.After(d):
		return false
	}
}

func (h *harness) logf(f string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(&h.log, f+"\n", a...)
}

// stop ends the loop (SIGTERM to the daemon, as systemctl stop); a
// second call does nothing.
func (h *harness) stop() {
	h.stopOnce.Do(func() {
		close(h.stopReq)
		h.mu.Lock()
		if h.cur != nil && h.cur.Process != nil {
			h.cur.Process.Signal(syscall.SIGTERM)
		}
		h.mu.Unlock()
		select {
		case <-h.stopped:
		case <-time.After(20 * time.Second):
			h.t.Error("harness did not stop")
		}
	})
}

func (h *harness) state() slots.State {
	st, err := slots.Load(slots.Layout{Root: h.root, DataDir: h.data})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// until polls cond for up to 30 s.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	h.t.Fatalf("timed out waiting for %s\nstate: %+v\nlog:\n%s", what, h.state(), h.log.String())
}

func (h *harness) healthVersion() string {
	resp, err := http.Get(h.url + "/api/v1/health")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct{ Status, Version string }
	json.NewDecoder(resp.Body).Decode(&v)
	if v.Status != "ok" {
		return ""
	}
	return v.Version
}

// token is the bootstrap token of the store (the real qubiqd wants the
// firmware permission; the stand-in ignores it).
func (h *harness) token() string {
	b, _ := os.ReadFile(filepath.Join(h.data, "bootstrap-token"))
	return strings.TrimSpace(string(b))
}

func (h *harness) flash(b []byte) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+"/api/v1/firmware", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+h.token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	return resp.StatusCode, body.String()
}

// tree lists the slots and the data dir (slots.json aside, which records
// refusals): "nothing written" means it is unchanged.
func (h *harness) tree() string {
	var b strings.Builder
	for _, root := range []string{h.root, h.data} {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || filepath.Base(p) == slots.StateFile || filepath.Base(p) == store.FileName {
				return nil
			}
			fmt.Fprintf(&b, "%s %v %d\n", p, fi.Mode(), fi.Size())
			return nil
		})
	}
	return b.String()
}

func TestHarness_FlashConfirmRefuseRollback(t *testing.T) {
	h := newHarness(t)
	h.install("1.0.0")
	go h.run()
	defer func() {
		h.stop()
		if t.Failed() {
			t.Logf("harness log:\n%s", h.log.String())
		}
	}()
	h.until("1.0.0 healthy", func() bool { return h.healthVersion() == "1.0.0" })

	// A good bundle: staged by the daemon, installed by qubiq-slot at the
	// restart, confirmed by the new daemon after its healthy period.
	if code, body := h.flash(h.bundle("1.1.0", runtime.GOARCH, true, 1, h.key)); code != 200 || !strings.Contains(body, `"slot":"b"`) {
		t.Fatalf("flash 1.1.0: %d %s", code, body)
	}
	h.until("1.1.0 confirmed in slot b", func() bool {
		st := h.state()
		return st.Active == "b" && !st.Trial && st.Last != nil && st.Last.Action == "confirm"
	})
	if v := h.healthVersion(); v != "1.1.0" {
		t.Fatalf("running %q after the flash", v)
	}
	// systemd heard of it: READY=1 with the trial in STATUS=, the restart's
	// reason, and STATUS= refreshed once confirmed.
	h.until("STATUS= after the confirmation", func() bool {
		return h.noted("STATUS=ok: 0 tags, 0 devices, API on ", ", slot b, version 1.1.0")
	})
	for _, want := range [][]string{{"READY=1\nSTATUS=ok: 0 tags", "slot b on trial (start 1 of 3), version 1.1.0"},
		{"STOPPING=1\nSTATUS=firmware 1.1.0 staged for slot b; restarting to install it"}} {
		if !h.noted(want...) {
			t.Errorf("no datagram with %q among %q", want, h.notes)
		}
	}

	// Refused bundles: nothing written, the daemon goes on.
	otherPriv, _, _ := firmware.Keygen("stranger", nil)
	stranger, _ := firmware.ParseSigningKey(otherPriv)
	good := h.bundle("1.2.0", runtime.GOARCH, true, 1, h.key)
	flipped := bytes.Clone(good)
	flipped[len(flipped)/3] ^= 0x40
	before := h.tree()
	starts := h.starts
	for _, c := range []struct {
		name string
		b    []byte
		kind string
	}{
		{"one byte changed", flipped, ""},
		{"unknown key", h.bundle("1.2.0", runtime.GOARCH, true, 1, stranger), "unknown_key"},
		{"downgrade", h.bundle("1.0.5", runtime.GOARCH, true, 1, h.key), "downgrade"},
		{"wrong arch", h.bundle("1.2.0", "mips64", true, 1, h.key), "arch"},
	} {
		code, body := h.flash(c.b)
		if code < 400 || (c.kind != "" && !strings.Contains(body, `"kind":"`+c.kind+`"`)) {
			t.Errorf("%s: %d %s", c.name, code, body)
		}
		if after := h.tree(); after != before {
			t.Errorf("%s: something was written:\n%s", c.name, lineDiff(before, after))
		}
		if st := h.state(); st.Active != "b" || st.Trial || st.Last.Action != "refuse" {
			t.Errorf("%s: state %+v", c.name, st.Last)
		}
	}
	if h.starts != starts || h.healthVersion() != "1.1.0" {
		t.Fatalf("a refused bundle restarted the daemon (starts %d → %d)", starts, h.starts)
	}

	// A bundle whose daemon migrates the store and never becomes healthy:
	// three trial starts, then qubiq-slot rolls back to b, puts the store
	// snapshot back, and the old daemon opens its store again.
	if code, body := h.flash(h.bundle("2.0.0", runtime.GOARCH, false, 2, h.key)); code != 200 {
		t.Fatalf("flash 2.0.0: %d %s", code, body)
	}
	h.until("rollback to b", func() bool {
		st := h.state()
		return st.Active == "b" && !st.Trial && st.Last != nil && st.Last.Action == "rollback"
	})
	h.until("1.1.0 healthy again", func() bool { return h.healthVersion() == "1.1.0" })
	st := h.state()
	if !st.Slots["a"].Bad || !strings.Contains(st.Last.Message, "store restored from the snapshot") {
		t.Fatalf("rollback result %+v", st.Last)
	}
	if h.bootFails != 0 {
		t.Fatalf("%d ExecStartPre failures", h.bootFails)
	}
	// The old slot's daemon opened the store put back: its audit log holds
	// the flash of 2.0.0 (recorded before the restart) and every refusal.
	audit := h.get("/api/v1/audit?limit=1000")
	for _, want := range []string{`"target":"bundle 2.0.0"`, `"result":"unknown_key"`, `"result":"downgrade"`, `"result":"arch"`} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log after the rollback lacks %s:\n%s", want, audit)
		}
	}
	h.stop()
	v, err := store.FileSchemaVersion(filepath.Join(h.data, store.FileName), time.Second)
	if err != nil || v != 1 {
		t.Fatalf("store schema after rollback: %d %v", v, err)
	}
	t.Logf("%d starts in all", h.starts)
}

// noted reports whether a datagram to NOTIFY_SOCKET holds every part.
func (h *harness) noted(parts ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.notes {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(n, p)
		}
		if all {
			return true
		}
	}
	return false
}

// get GETs path with the bootstrap token and returns the body.
func (h *harness) get(path string) string {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+h.token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// lineDiff shows the lines only one of a and b has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out strings.Builder
	for l := range ma {
		if !mb[l] {
			out.WriteString("- " + l + "\n")
		}
	}
	for l := range mb {
		if !ma[l] {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}

// TestHarness_KillDuringFlash cuts the power (SIGKILL) at several points
// of a flash with the real qubiqd: half-way through the upload, just
// after the daemon accepted the bundle, and at six moments of qubiq-slot's
// boot at the next starts (before, during and after the install). Every
// time the next start boots a complete slot: in the end either the new
// version is confirmed or, when the cuts used up its trial starts, the old
// one runs again after a rollback; the active slot matches its manifest
// and current names it.
func TestHarness_KillDuringFlash(t *testing.T) {
	h := newHarness(t)
	h.install("1.0.0")
	go h.run()
	defer func() {
		h.stop()
		if t.Failed() {
			t.Logf("harness log:\n%s", h.log.String())
		}
	}()
	h.until("1.0.0 healthy", func() bool { return h.healthVersion() == "1.0.0" })
	good := h.bundle("1.1.0", runtime.GOARCH, true, 1, h.key)
	l := slots.Layout{Root: h.root, DataDir: h.data}

	// 1. Half-way through the upload.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/api/v1/firmware", pr)
		req.Header.Set("Authorization", "Bearer "+h.token())
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s", resp.Status)
		}
		done <- err
	}()
	if _, err := pw.Write(good[:len(good)/2]); err != nil {
		t.Fatal(err)
	}
	h.until("the upload in progress", func() bool { return strings.Contains(h.get("/api/v1/firmware"), `"upload":{"received":`) })
	starts := h.startCount()
	h.killDaemon()
	pw.CloseWithError(errors.New("power cut"))
	<-done
	h.until("1.0.0 healthy after the cut upload", func() bool { return h.startCount() > starts && h.healthVersion() == "1.0.0" })
	if st := h.state(); st.Active != "a" || st.Trial {
		t.Fatalf("after a cut upload: %+v", st)
	}
	if m, _ := filepath.Glob(filepath.Join(h.data, firmware.StageDir, "*")); len(m) != 0 {
		t.Fatalf("a cut upload left %v", m)
	}

	// 2. Right after the daemon accepted the bundle (staged, fsync'd,
	// answered), before it exits; then 3. six cuts during qubiq-slot's
	// install at the next starts.
	h.mu.Lock()
	h.agentKills = []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond,
		150 * time.Millisecond, 400 * time.Millisecond}
	h.mu.Unlock()
	if code, body := h.flash(good); code != 200 {
		t.Fatalf("flash 1.1.0: %d %s", code, body)
	}
	h.killDaemon()
	// Cuts after the install count as trial starts (qubiq-slot counts a
	// start before the daemon runs, so a crash counts): enough of them
	// roll the trial back, which is a slot that boots too.
	h.until("a settled slot after the cuts", func() bool {
		h.mu.Lock()
		left := len(h.agentKills)
		h.mu.Unlock()
		st := h.state()
		return left == 0 && !st.Trial && st.Last != nil && (st.Last.Action == "confirm" || st.Last.Action == "rollback")
	})
	st := h.state()
	want := map[string]string{"a": "1.0.0", "b": "1.1.0"}[st.Active]
	h.until("the settled slot healthy", func() bool { return h.healthVersion() == want })
	if st.Active == "a" && st.Last.Action != "rollback" || st.Active == "b" && st.Last.Action != "confirm" {
		t.Fatalf("slot %s active after %s", st.Active, st.Last.Action)
	}
	if err := firmware.VerifySlot(l, st.Active); err != nil {
		t.Errorf("active slot %s: %v", st.Active, err)
	}
	if cur, err := slots.CurrentSlot(l); err != nil || cur != st.Active {
		t.Errorf("current %q (%v), active %s", cur, err, st.Active)
	}
	t.Logf("settled on slot %s (%s, %s)", st.Active, want, st.Last.Message)
	if h.bootFails != 0 {
		t.Fatalf("%d ExecStartPre failures", h.bootFails)
	}
	t.Logf("%d starts, %d qubiq-slot runs cut", h.startCount(), h.agentKilled)
}

func (h *harness) startCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts
}

// killDaemon sends SIGKILL to the running daemon (a power cut for it).
func (h *harness) killDaemon() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur != nil && h.cur.Process != nil {
		h.cur.Process.Kill()
	}
}
