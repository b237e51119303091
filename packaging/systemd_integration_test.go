//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/slots"
)

// bootSystemd boots the root's systemd as PID 1 of new PID, mount, UTS and
// IPC namespaces (pivot_root into the root, so that it and the services can
// make user namespaces, which the kernel refuses under chroot), and returns
// a function running a command inside. The namespaces die with the test.
func bootSystemd(t *testing.T, root string) func(args ...string) (string, error) {
	t.Helper()
	os.MkdirAll(filepath.Join(root, ".oldroot"), 0o755)
	script := fmt.Sprintf(`set -e
mount --make-rprivate /
mount --bind %[1]s %[1]s
mount -t proc proc %[1]s/proc
mount -t sysfs -o ro sysfs %[1]s/sys
mount -t cgroup2 none %[1]s/sys/fs/cgroup
mount -t tmpfs tmpfs %[1]s/run
mount -t tmpfs tmpfs %[1]s/tmp
cd %[1]s
pivot_root . .oldroot
umount -l /.oldroot
exec /usr/bin/env -i container=qubiq-test /lib/systemd/systemd --system --log-target=journal`, root)
	cmd := exec.Command("unshare", "--fork", "--kill-child", "--pid", "--mount", "--uts", "--ipc", "sh", "-c", script)
	out := &lockedBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var pid string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && pid == ""; time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			if exe, _ := os.Readlink("/proc/" + f[0] + "/exe"); strings.HasSuffix(exe, "/systemd") {
				pid = f[0]
			}
		}
	}
	if pid == "" {
		t.Fatalf("systemd did not start in the root:\n%s", out.String())
	}
	in := func(args ...string) (string, error) {
		b, err := exec.Command("nsenter", append([]string{"-t", pid, "-m", "-p", "-r", "-w"}, args...)...).CombinedOutput()
		return string(b), err
	}
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if s, _ := in("/bin/systemctl", "is-system-running"); strings.HasPrefix(s, "running") || strings.HasPrefix(s, "degraded") {
			return in
		}
	}
	s, _ := in("/bin/systemctl", "--failed", "--no-pager")
	t.Fatalf("systemd in the root did not finish booting:\n%s", s)
	return nil
}

func unitProps(t *testing.T, in func(...string) (string, error)) map[string]string {
	t.Helper()
	s, err := in("/bin/systemctl", "show", "qubiqd", "-p", "ActiveState,SubState,NRestarts,User,WatchdogTimestampMonotonic,StatusText,MainPID")
	if err != nil {
		t.Fatalf("systemctl show: %v %s", err, s)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// TestPackage_UnitUnderSystemd boots systemd 252 in a Debian root where the
// .deb is installed, and checks the hardened unit for real: qubiqd starts
// as qubiq under every setting of the unit (Type=notify: active only after
// READY=1), runs a script in its private runtime, and feeds the watchdog.
// Then slot a's daemon is replaced by the stand-in (what qubiqd does once
// wired) and a bundle is flashed through systemd: the daemon stages it and
// exits 75, systemd restarts the unit, qubiq-slot (ExecStartPre=+) installs
// it into slot b, and the new daemon confirms its trial.
func TestPackage_UnitUnderSystemd(t *testing.T) {
	root := bootstrapRootWith(t, "systemd", []string{"systemd", "systemd-sysv", "dbus"})
	dir := buildPackage(t, "0.1.0")
	b, _ := os.ReadFile(debPath(dir, "0.1.0"))
	os.WriteFile(filepath.Join(root, "tmp/qubiq.deb"), b, 0o644)
	chroot(t, root, nil, "dpkg", "-i", "/tmp/qubiq.deb")
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	conf := filepath.Join(root, "etc/qubiq/qubiq.yaml")
	c := strings.Replace(readFile(t, conf), "listen: 127.0.0.1:8080", fmt.Sprintf("listen: 127.0.0.1:%d", port), 1)
	// This host's cgroup2 hierarchy has no memory, pids or cpu controller
	// (they are bound to cgroup v1), so the delegated subtree cannot hold
	// those limits: the test site turns them off (memory stays, as an
	// rlimit).
	c = strings.Replace(strings.Replace(c, "  pids_max: 64\n", "  pids_max: unlimited\n", 1), "  cpu_max: 1.0\n", "  cpu_max: unlimited\n", 1)
	os.WriteFile(conf, []byte(c), 0o640)

	in := bootSystemd(t, root)
	h := waitHealth(t, url, in)
	if h["status"] != "ok" || h["version"] != "0.1.0" {
		t.Fatalf("health under systemd: %v", h)
	}
	// The workers keep their private network namespace though the daemon
	// is not root (docs/appliance.md, "Workers when the daemon is not root").
	sbh, _ := h["sandbox"].(map[string]any)
	if hd, _ := sbh["hardening"].(map[string]any); hd["netns"] != "active" || hd["landlock"] == nil || hd["no_new_privs"] != "active" {
		t.Errorf("sandbox hardening under systemd as user qubiq: %v; want netns and no_new_privs active", sbh["hardening"])
	}
	token := strings.TrimSpace(readFile(t, filepath.Join(root, "var/lib/qubiq/bootstrap-token")))
	runScript(t, url, token)
	props := unitProps(t, in)
	if props["ActiveState"] != "active" || props["SubState"] != "running" || props["User"] != "qubiq" {
		t.Fatalf("unit: %v", props)
	}
	// The watchdog: pings every 15 s (WatchdogSec=30s) while the daemon shows progress.
	first := props["WatchdogTimestampMonotonic"]
	for end := time.Now().Add(40 * time.Second); ; time.Sleep(time.Second) {
		if now := unitProps(t, in)["WatchdogTimestampMonotonic"]; now != first && now != "0" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no watchdog ping within 40 s: %v", unitProps(t, in))
		}
	}
	t.Logf("qubiqd under systemd: %v", unitProps(t, in))

	// Flash through systemd, with the stand-in as the daemon of slot a.
	if out, err := in("/bin/systemctl", "stop", "qubiqd"); err != nil {
		t.Fatalf("stop: %v %s", err, out)
	}
	standin := filepath.Join(t.TempDir(), "standin")
	gobuild(t, standin, "./packaging/standin", "-s -w -X main.version=0.1.0")
	sb, _ := os.ReadFile(standin)
	os.WriteFile(filepath.Join(root, "usr/lib/qubiq/slots/a/bin/qubiqd"), sb, 0o755)
	os.MkdirAll(filepath.Join(root, "etc/systemd/system/qubiqd.service.d"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/systemd/system/qubiqd.service.d/test.conf"),
		[]byte("[Service]\nEnvironment=QUBIQ_CONFIRM_AFTER=1s QUBIQ_TRIAL_TIMEOUT=3s\n"), 0o644)
	in("/bin/systemctl", "daemon-reload")
	if out, err := in("/bin/systemctl", "start", "qubiqd"); err != nil {
		t.Fatalf("start the stand-in: %v %s", err, out)
	}
	waitVersion(t, url, "0.1.0", in)
	restartsBefore := unitProps(t, in)["NRestarts"]

	tree := filepath.Join(t.TempDir(), "slot")
	os.MkdirAll(filepath.Join(tree, "bin"), 0o755)
	gobuild(t, filepath.Join(tree, "bin", "qubiqd"), "./packaging/standin", "-s -w -X main.version=0.2.0")
	os.WriteFile(filepath.Join(tree, "bin", "qubiqctl"), []byte("#!/bin/sh\n"), 0o755)
	key := devKey(t)
	qfw := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("go", "run", "./packaging", "bundle", "--slot", tree, "--version", "0.2.0", "--arch", runtime.GOARCH, "--key", key, "--out", qfw)
	cmd.Dir = ".."
	bout, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bundle: %v %s", err, bout)
	}
	bundle, _ := os.ReadFile(strings.TrimSpace(string(bout)))
	resp, err := http.Post(url+"/api/v1/firmware", "application/octet-stream", strings.NewReader(string(bundle)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("flash: %s", resp.Status)
	}
	waitVersion(t, url, "0.2.0", in)
	l := slots.Layout{Root: filepath.Join(root, "usr/lib/qubiq"), DataDir: filepath.Join(root, "var/lib/qubiq")}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st, err := slots.Load(l)
		if err == nil && st.Active == "b" && !st.Trial && st.Last != nil && st.Last.Action == "confirm" {
			break
		}
		if time.Now().After(end) {
			j, _ := in("/bin/journalctl", "-u", "qubiqd", "--no-pager", "-n", "60")
			t.Fatalf("0.2.0 not confirmed in slot b: %+v\n%s", st, j)
		}
	}
	props = unitProps(t, in)
	if props["ActiveState"] != "active" || props["NRestarts"] == restartsBefore {
		t.Fatalf("after the flash: %v (restarts before %s)", props, restartsBefore)
	}
	if err := firmware.VerifySlot(l, "b"); err != nil {
		t.Fatal(err)
	}
	j, _ := in("/bin/journalctl", "-u", "qubiqd", "--no-pager", "-o", "cat", "-g", "qubiq-slot")
	if !strings.Contains(j, "firmware 0.2.0 installed in slot b") {
		t.Fatalf("journal:\n%s", j)
	}
	if props["StatusText"] != "stand-in 0.2.0" {
		t.Errorf("STATUS= not seen by systemd: %q", props["StatusText"])
	}
	// The stand-in logs through systemd.NewLogger: under systemd that is
	// the journal's native protocol, with the attributes as fields.
	jj, err := in("/bin/journalctl", "-u", "qubiqd", "-o", "json", "--no-pager", "VERSION=0.2.0", "SLOG_LEVEL=INFO")
	if err != nil || !strings.Contains(jj, `"SYSLOG_IDENTIFIER":"qubiqd"`) || !strings.Contains(jj, `"PRIORITY":"6"`) {
		t.Errorf("no structured journal entries of the stand-in: %v\n%.2000s", err, jj)
	}
	t.Logf("flashed through systemd: %v", props)

	// A bundle whose daemon never becomes healthy (and migrates the store):
	// three trial starts under systemd, then qubiq-slot rolls back to b.
	bad := filepath.Join(t.TempDir(), "slot")
	os.MkdirAll(filepath.Join(bad, "bin"), 0o755)
	gobuild(t, filepath.Join(bad, "bin", "qubiqd"), "./packaging/standin", "-s -w -X main.version=0.3.0 -X main.healthy=no -X main.schema=2")
	os.WriteFile(filepath.Join(bad, "bin", "qubiqctl"), []byte("#!/bin/sh\n"), 0o755)
	cmd = exec.Command("go", "run", "./packaging", "bundle", "--slot", bad, "--version", "0.3.0", "--arch", runtime.GOARCH, "--schema", "2", "--key", key, "--out", qfw)
	cmd.Dir = ".."
	if bout, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("bundle: %v %s", err, bout)
	}
	bundle, _ = os.ReadFile(strings.TrimSpace(string(bout)))
	resp, err = http.Post(url+"/api/v1/firmware", "application/octet-stream", strings.NewReader(string(bundle)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("flash 0.3.0: %v %v", err, resp)
	}
	resp.Body.Close()
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		st, err := slots.Load(l)
		if err == nil && st.Active == "b" && st.Last != nil && st.Last.Action == "rollback" {
			break
		}
		if time.Now().After(end) {
			j, _ := in("/bin/journalctl", "-u", "qubiqd", "--no-pager", "-n", "60")
			t.Fatalf("no rollback under systemd: %+v\n%s", st, j)
		}
	}
	waitVersion(t, url, "0.2.0", in)
	if p := unitProps(t, in); p["ActiveState"] != "active" {
		t.Fatalf("after the rollback: %v", p)
	}
}

func waitHealth(t *testing.T, url string, in func(...string) (string, error)) map[string]any {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(url + "/api/v1/health")
		if err != nil {
			continue
		}
		var h map[string]any
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err == nil && pythonStatus(h) != "starting" { // the workers start after READY=1
			return h
		}
	}
	j, _ := in("/bin/journalctl", "-u", "qubiqd", "--no-pager", "-n", "80")
	t.Fatalf("no health with the sandbox started under systemd within 60 s:\n%s", j)
	return nil
}

func waitVersion(t *testing.T, url, version string, in func(...string) (string, error)) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(url + "/api/v1/health")
		if err != nil {
			continue
		}
		var h struct{ Status, Version string }
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if h.Version == version && h.Status == "ok" {
			return
		}
	}
	j, _ := in("/bin/journalctl", "-u", "qubiqd", "--no-pager", "-n", "80")
	t.Fatalf("version %s not healthy under systemd within 60 s:\n%s", version, j)
}

// devKey copies the development signing key to a 0600 file (git does not
// keep the mode) and returns its path.
func devKey(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("keys/dev-firmware-signing.key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := firmware.ParseSigningKey(b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dev.key")
	os.WriteFile(p, b, 0o600)
	return p
}
