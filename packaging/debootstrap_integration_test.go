//go:build integration

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bootstrapRoot returns a fresh Debian bookworm root (debootstrap
// --variant=minbase, with the runtime's shared libraries), made once and
// kept as a tarball in the user's cache directory so later runs only
// unpack it. It skips when this machine cannot make one (no debootstrap,
// not root, or the Debian mirror unreachable), saying which.
func bootstrapRoot(t *testing.T) string { return bootstrapRootWith(t, "minbase", nil) }

// bootstrapRootWith is bootstrapRoot with more packages (kept in a
// tarball named by flavour).
func bootstrapRootWith(t *testing.T, flavour string, extra []string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("installing into a debootstrap root needs root (this machine's tests run as root)")
	}
	ds, err := exec.LookPath("debootstrap")
	if err != nil {
		t.Skip("debootstrap is not installed on this machine (apt-get install debootstrap)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	tarball := filepath.Join(cache, "qubiq-test", "debootstrap-bookworm-"+flavour+".tar.gz")
	if _, err := os.Stat(tarball); err != nil {
		mirror := debianMirror()
		tmp, err := os.MkdirTemp("", "qubiq-debootstrap-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		include := append([]string{"libssl3", "libsqlite3-0", "libexpat1", "libuuid1", "liblzma5", "libbz2-1.0", "libffi8"}, extra...)
		cmd := exec.Command(ds, "--variant=minbase", "--include="+strings.Join(include, ","), "bookworm", tmp, mirror)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("debootstrap of bookworm from %s failed, so no root to install into (the mirror is unreachable from this machine?): %v\n%s", mirror, err, tail(out))
		}
		os.MkdirAll(filepath.Dir(tarball), 0o755)
		if out, err := exec.Command("tar", "-czf", tarball+".tmp", "-C", tmp, ".").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v %s", err, out)
		}
		if err := os.Rename(tarball+".tmp", tarball); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	mustRun(t, "tar", "-xzf", tarball, "-C", root)
	if err := os.Chmod(root, 0o755); err != nil { // it is "/" inside: the qubiq user walks it
		t.Fatal(err)
	}
	return root
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// debianMirror is the first URI of the machine's Debian sources, else
// deb.debian.org.
func debianMirror() string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if u, ok := strings.CutPrefix(l, "URIs:"); ok && !strings.Contains(u, "security") {
				fh.Close()
				return strings.Fields(u)[0]
			}
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "deb" && strings.Contains(f[1], "debian") && !strings.Contains(f[1], "security") {
				fh.Close()
				return f[1]
			}
		}
		fh.Close()
	}
	return "http://deb.debian.org/debian"
}

// chroot runs a command inside root with a clean environment.
func chroot(t *testing.T, root string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{root}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startInRoot runs the installed qubiqd inside root as the unit would: as
// user qubiq, with the unit's PYTHON_PATH and nothing else in its
// environment, /proc mounted in a private mount namespace. systemd's
// Delegate=yes is stood in for by cgroups (memory, pids, cpu) made for the
// test and handed to the qubiq user, named by QUBIQ_SANDBOX_CGROUP_PARENT.
func startInRoot(t *testing.T, root string) *proc {
	t.Helper()
	uid, gid := qubiqIDs(t, root)
	parent := fmt.Sprintf("qubiq-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, c := range []string{"memory", "pids", "cpu"} {
		dir := filepath.Join("/sys/fs/cgroup", c, parent)
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue // no such writable v1 hierarchy here: the sandbox says which limits it lacks
		}
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { os.Lchown(p, uid, gid); return nil })
		t.Cleanup(func() { removeCgroup(dir) })
	}
	os.MkdirAll(filepath.Join(root, "sys/fs/cgroup"), 0o755)
	script := fmt.Sprintf("mount -t proc proc %[1]s/proc && mount --rbind /sys/fs/cgroup %[1]s/sys/fs/cgroup && "+
		"exec chroot --userspec=qubiq:qubiq %[1]s /usr/bin/env -i PYTHON_PATH=/usr/lib/qubiq/current/python/bin/python3 "+
		"QUBIQ_SANDBOX_CGROUP_PARENT=/%[2]s /usr/bin/qubiqd --config /etc/qubiq/qubiq.yaml", root, parent)
	return start(t, "unshare", []string{"-m", "--propagation", "private", "sh", "-c", script}, os.Environ())
}

// removeCgroup removes a test cgroup and the groups the daemon made in it,
// deepest first.
func removeCgroup(dir string) {
	var dirs []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50 && os.Remove(dirs[i]) != nil; try++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func qubiqIDs(t *testing.T, root string) (int, int) {
	t.Helper()
	for _, l := range strings.Split(readFile(t, filepath.Join(root, "etc/passwd")), "\n") {
		f := strings.Split(l, ":")
		if len(f) > 3 && f[0] == "qubiq" {
			var uid, gid int
			fmt.Sscan(f[2], &uid)
			fmt.Sscan(f[3], &gid)
			return uid, gid
		}
	}
	t.Fatal("no qubiq user in the root")
	return 0, 0
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPackage_InstallUpgradePurgeInDebootstrapRoot installs the .deb for
// real into a Debian root (dpkg in a chroot, so its maintainer scripts run),
// runs the installed daemon, upgrades to a second build, and checks the data
// directory and the edited conffile survived; then purge keeps the data
// unless asked.
func TestPackage_InstallUpgradePurgeInDebootstrapRoot(t *testing.T) {
	root := bootstrapRoot(t)
	v1, v2 := buildPackage(t, "0.1.0"), buildPackage(t, "0.1.1")
	for _, v := range []struct{ dir, ver string }{{v1, "0.1.0"}, {v2, "0.1.1"}} {
		b, _ := os.ReadFile(debPath(v.dir, v.ver))
		os.WriteFile(filepath.Join(root, "tmp", filepath.Base(debPath(v.dir, v.ver))), b, 0o644)
	}
	chroot(t, root, nil, "dpkg", "-i", "/tmp/qubiq_0.1.0_amd64.deb")

	// What postinst made.
	if !strings.Contains(readFile(t, filepath.Join(root, "etc/passwd")), "\nqubiq:") {
		t.Fatal("no qubiq user")
	}
	if l, err := os.Readlink(filepath.Join(root, "usr/lib/qubiq/current")); err != nil || l != "slots/a" {
		t.Fatalf("current -> %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/qubiqd.service")); err != nil {
		t.Fatalf("qubiqd.service not enabled: %v", err)
	}
	st := chroot(t, root, nil, "stat", "-c", "%U:%G %a", "/var/lib/qubiq", "/etc/qubiq/qubiq.yaml")
	if st != "qubiq:qubiq 700\nroot:qubiq 640\n" {
		t.Fatalf("owners and modes:\n%s", st)
	}
	// The site edits the conffile: another port (the test's free one).
	port := freePort(t)
	conf := filepath.Join(root, "etc/qubiq/qubiq.yaml")
	edited := strings.Replace(readFile(t, conf), "listen: 127.0.0.1:8080", fmt.Sprintf("listen: 127.0.0.1:%d", port), 1)
	os.WriteFile(conf, []byte(edited), 0o640)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)

	p := startInRoot(t, root)
	h := health(t, p, url)
	if h["version"] != "0.1.0" {
		t.Fatalf("health %v", h)
	}
	t.Logf("installed daemon, running as qubiq: status %v, sandbox %v", h["status"], h["sandbox"])
	token := strings.TrimSpace(readFile(t, filepath.Join(root, "var/lib/qubiq/bootstrap-token")))
	runScript(t, url, token)
	p.stop(t)
	data := filepath.Join(root, "var/lib/qubiq")
	os.MkdirAll(filepath.Join(data, "python-packages"), 0o700)
	os.WriteFile(filepath.Join(data, "python-packages", "marker"), []byte("installed package"), 0o600)
	dbBefore := readFile(t, filepath.Join(data, "qubiq.db"))

	// Upgrade.
	out := chroot(t, root, nil, "dpkg", "-i", "--force-confold", "/tmp/qubiq_0.1.1_amd64.deb")
	if strings.Contains(out, "conffile") && strings.Contains(out, "prompt") {
		t.Fatalf("dpkg asked about the conffile:\n%s", out)
	}
	if readFile(t, conf) != edited {
		t.Fatal("the upgrade replaced the edited conffile")
	}
	if readFile(t, filepath.Join(data, "python-packages", "marker")) != "installed package" ||
		strings.TrimSpace(readFile(t, filepath.Join(data, "bootstrap-token"))) != token || readFile(t, filepath.Join(data, "qubiq.db")) != dbBefore {
		t.Fatal("the upgrade changed the data directory")
	}
	if !strings.Contains(readFile(t, filepath.Join(root, "usr/lib/qubiq/slots/a/manifest.json")), `"version": "0.1.1"`) {
		t.Fatal("slot a does not hold 0.1.1")
	}
	if s := readFile(t, filepath.Join(data, "slots.json")); !strings.Contains(s, "upgraded from 0.1.0") {
		t.Fatalf("slots.json does not record the upgrade:\n%s", s)
	}
	p = startInRoot(t, root)
	if h := health(t, p, url); h["version"] != "0.1.1" {
		t.Fatalf("health after upgrade %v", h)
	}
	runScript(t, url, token) // the old store, with its bootstrap token, opened by the new build
	p.stop(t)

	// Purge keeps the data unless asked.
	out = chroot(t, root, nil, "dpkg", "--purge", "qubiq")
	if !strings.Contains(out, "kept the data directory") {
		t.Fatalf("purge output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, "qubiq.db")); err != nil {
		t.Fatal("purge without QUBIQ_PURGE_DATA removed the store")
	}
	if _, err := os.Stat(filepath.Join(root, "usr/lib/qubiq")); err == nil {
		t.Fatal("/usr/lib/qubiq left after purge")
	}
	chroot(t, root, nil, "dpkg", "-i", "/tmp/qubiq_0.1.1_amd64.deb")
	out = chroot(t, root, []string{"QUBIQ_PURGE_DATA=yes"}, "dpkg", "--purge", "qubiq")
	if _, err := os.Stat(data); err == nil || !strings.Contains(out, "removed the data directory") {
		t.Fatalf("purge with QUBIQ_PURGE_DATA=yes kept %s:\n%s", data, out)
	}
}
