//go:build integration

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
// The daemon is the stand-in (packaging/standin), which does what qubiqd
// does once it is wired. QUBIQ_HARNESS_DAEMON=real uses bin/qubiqd (from
// QUBIQ_BIN) for the healthy versions instead, once qubiqd serves POST
// /api/v1/firmware and confirms its trial (docs/appliance.md, "Wiring").
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
}

const startLimit = 15

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
	os.WriteFile(h.cfg, []byte(fmt.Sprintf("appliance_id: harness\ndata_dir: %s\nhttp: {listen: \"127.0.0.1:%d\"}\npython: {path: %s/current/python/bin/python3, replicas: 1}\n",
		h.data, port, h.root)), 0o644)
	h.agent = filepath.Join(dir, "qubiq-slot")
	gobuild(t, h.agent, "./cmd/qubiq-slot")
	h.env = append(os.Environ(), "QUBIQ_SLOTS_ROOT="+h.root, "QUBIQ_TRUSTED_KEYS="+h.keys,
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
	if os.Getenv("QUBIQ_HARNESS_DAEMON") == "real" && healthy && schema == 1 {
		gobuild(h.t, filepath.Join(tree, "bin", "qubiqd"), "./cmd/qubiqd", "-X qubiq.dev/edge/daemon.Version="+version)
		os.Symlink("/usr/bin/python3.11", filepath.Join(tree, "python", "bin", "python3"))
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
		out, err := exec.Command(h.agent, "boot", "--root", h.root, "--data-dir", h.data, "--trusted-keys", h.keys).CombinedOutput()
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
		if err == nil || (errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()) {
			return // a clean stop: Restart=on-failure does not restart
		}
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

func (h *harness) flash(b []byte) (int, string) {
	h.t.Helper()
	resp, err := http.Post(h.url+"/api/v1/firmware", "application/octet-stream", bytes.NewReader(b))
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
	h.stop()
	v, err := store.FileSchemaVersion(filepath.Join(h.data, store.FileName), time.Second)
	if err != nil || v != 1 {
		t.Fatalf("store schema after rollback: %d %v", v, err)
	}
	db, err := store.Open(filepath.Join(h.data, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if by, _ := db.Meta("last_opened_by"); string(by) != "1.1.0" {
		t.Fatalf("store last opened by %q", by)
	}
	t.Logf("%d starts in all", h.starts)
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
