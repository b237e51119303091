//go:build integration

package main

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackage_DebContents builds the .deb and checks what dpkg-deb says of
// it: files, conffiles, Depends, maintainer scripts.
func TestPackage_DebContents(t *testing.T) {
	dir := buildPackage(t, "0.1.0")
	deb := debPath(dir, "0.1.0")
	contents := mustRun(t, "dpkg-deb", "-c", deb)
	for _, want := range []string{
		"./usr/lib/qubiq/slots/a/bin/qubiqd", "./usr/lib/qubiq/slots/a/bin/qubiqctl", "./usr/lib/qubiq/slots/a/manifest.json",
		"./usr/lib/qubiq/slots/a/python/bin/python3.11", "./usr/lib/qubiq/slots/a/python/bin/python3 -> python3.11",
		"./usr/lib/qubiq/slots/a/python/lib/python3.11/os.py", "./usr/lib/qubiq/slots/a/python/lib/python3.11/lib-dynload/_ssl.",
		"./usr/lib/qubiq/slots/a/python/lib/python3.11/dist-packages/pip/__init__.py",
		"./usr/lib/qubiq/slots/a/python/lib/python3.11/dist-packages/setuptools/__init__.py",
		"./usr/lib/qubiq/slots/a/python/lib/python3.11/dist-packages/wheel/__init__.py",
		"./usr/lib/qubiq/slots/a/python/runtime-manifest.json", "./usr/lib/qubiq/qubiq-slot",
		"./lib/systemd/system/qubiqd.service", "./etc/qubiq/qubiq.yaml", "./etc/qubiq/trusted-firmware-keys",
		"./usr/bin/qubiqd -> /usr/lib/qubiq/current/bin/qubiqd", "./usr/bin/qubiqctl -> /usr/lib/qubiq/current/bin/qubiqctl",
	} {
		if !strings.Contains(contents, want) {
			t.Errorf("the .deb lacks %s", want)
		}
	}
	for _, trimmed := range []string{"/python3.11/test/", "/idlelib/", "/tkinter/", "/ensurepip/", "/python/lib/python3.11/config-3.11", "sitecustomize.py", "lib-dynload/readline."} {
		if strings.Contains(contents, trimmed) {
			t.Errorf("the .deb holds %s, which is trimmed", trimmed)
		}
	}
	if !strings.Contains(contents, "/python3.11/__pycache__/os.cpython-311.pyc") {
		t.Error("the standard library is not byte-compiled (the slot is read-only to the workers)")
	}
	if strings.Contains(contents, "./usr/lib/qubiq/current") || strings.Contains(contents, "slots/b") {
		t.Error("current and slot b belong to the slot agent, not to dpkg")
	}
	ctrl := t.TempDir()
	mustRun(t, "dpkg-deb", "-e", deb, ctrl)
	conf, _ := os.ReadFile(filepath.Join(ctrl, "conffiles"))
	if got := strings.Fields(string(conf)); !slices.Equal(got, []string{"/etc/qubiq/qubiq.yaml", "/etc/qubiq/trusted-firmware-keys"}) {
		t.Errorf("conffiles %q", got)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(ctrl, s)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("maintainer script %s missing or not executable", s)
			continue
		}
		mustRun(t, "sh", "-n", p)
	}
	post, _ := os.ReadFile(filepath.Join(ctrl, "postinst"))
	for _, want := range []string{"adduser --system", "qubiq-slot\" activate", "deb-systemd-helper enable qubiqd.service", "chmod 0700 \"$DATA\""} {
		if !strings.Contains(string(post), want) {
			t.Errorf("postinst lacks %q", want)
		}
	}
	depends := strings.TrimSpace(mustRun(t, "dpkg-deb", "-f", deb, "Depends"))
	var rm RuntimeManifest
	b, _ := os.ReadFile(filepath.Join(dir, "slot-"+rmArch(), "python", RuntimeManifestName))
	if err := json.Unmarshal(b, &rm); err != nil {
		t.Fatal(err)
	}
	for _, lib := range append([]string{"adduser", "libc6", "libssl3", "libsqlite3-0", "libffi8", "zlib1g", "libexpat1"}, rm.Depends...) {
		if !slices.Contains(strings.Split(depends, ", "), lib) {
			t.Errorf("Depends %q lacks %s", depends, lib)
		}
	}
	for _, never := range []string{"python3", "python3.11", "libreadline8", "libncursesw6", "libtinfo6", "libgdbm6", "libdb5.3", "libnsl2"} {
		if slices.Contains(strings.Split(depends, ", "), never) {
			t.Errorf("Depends %q names %s, which the private runtime does not need", depends, never)
		}
	}
	if rm.Python == "" || len(rm.Files) < 500 || rm.Packages["python3-pip"] == "" {
		t.Errorf("runtime manifest: python %q, %d files, packages %v", rm.Python, len(rm.Files), rm.Packages)
	}
}

// TestPackage_UnpackedRunsWithItsOwnRuntime unpacks the .deb into a
// throwaway root and runs its qubiqd there with an empty environment, in a
// mount namespace where the system's /usr/lib/python3* are hidden, to a
// healthy /api/v1/health and a script run.
func TestPackage_UnpackedRunsWithItsOwnRuntime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private mount namespace (this machine's tests run as root)")
	}
	dir := buildPackage(t, "0.1.0")
	root := t.TempDir()
	mustRun(t, "dpkg-deb", "-x", debPath(dir, "0.1.0"), root)
	if err := os.Symlink("slots/a", filepath.Join(root, "usr/lib/qubiq/current")); err != nil { // what postinst does
		t.Fatal(err)
	}
	py := filepath.Join(root, "usr/lib/qubiq/current/python/bin/python3")
	hide := "for d in /usr/lib/python3 /usr/lib/python3.11 /usr/local/lib/python3.11; do [ -d $d ] && mount -t tmpfs tmpfs $d; done; "

	// The interpreter alone: only its own tree on sys.path, the C modules load.
	out := mustStdout(t, "unshare", "-m", "--propagation", "private", "sh", "-c",
		hide+"exec env -i "+py+` -I -c 'import sys, json, ssl, sqlite3, ctypes, decimal, lzma, bz2, zlib, uuid, hashlib, setuptools, wheel, pip; print(json.dumps({"path": sys.path, "prefix": sys.prefix, "pip": pip.__version__}))'`)
	var info struct {
		Path   []string `json:"path"`
		Prefix string   `json:"prefix"`
		Pip    string   `json:"pip"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, p := range info.Path {
		if !strings.HasPrefix(p, filepath.Join(root, "usr/lib/qubiq")) {
			t.Errorf("sys.path holds %s, outside the runtime", p)
		}
	}
	if info.Pip == "" || !strings.HasPrefix(info.Prefix, root) {
		t.Errorf("runtime info %+v", info)
	}

	// The daemon: empty environment, the runtime named only in its config.
	work := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf("appliance_id: unpacked\ndata_dir: %s\nproject: project.yaml\nhttp: {listen: \"127.0.0.1:%d\"}\npython: {path: %s, replicas: 1}\n",
		filepath.Join(work, "data"), port, py)
	os.WriteFile(filepath.Join(work, "qubiq.yaml"), []byte(cfg), 0o644)
	os.WriteFile(filepath.Join(work, "project.yaml"), []byte(demoProject), 0o644)
	qubiqd := filepath.Join(root, "usr/lib/qubiq/current/bin/qubiqd")
	p := start(t, "unshare", []string{"-m", "--propagation", "private", "sh", "-c",
		hide + "exec env -i " + qubiqd + " --config " + filepath.Join(work, "qubiq.yaml")}, os.Environ())
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	h := health(t, p, url)
	sb, _ := h["sandbox"].(map[string]any)
	pyh, _ := sb["python"].(map[string]any)
	if h["status"] != "ok" || pyh["status"] != "ok" || !strings.HasPrefix(fmt.Sprint(pyh["path"]), root) || h["version"] != "0.1.0" {
		t.Fatalf("health %v", h)
	}
	tok, err := os.ReadFile(filepath.Join(work, "data", "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, url, strings.TrimSpace(string(tok)))
}

const demoProject = `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Pump/Speed, device: sim, address: "ramp(0,1500,60s)", type: float64, units: rpm, scan: 1s}
  - {path: Line1/Pump/Setpoint, device: sim, address: memory, type: float64, units: rpm}
`

func rmArch() string {
	return strings.TrimSpace(string(must(exec.Command("go", "env", "GOARCH").Output())))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestPackage_Arm64WithAGivenRuntime builds an arm64 package from a
// runtime directory made elsewhere (here a stand-in tree with its
// manifest): the Go binaries are cross-compiled, the Depends come from the
// runtime's manifest, and a runtime for another architecture is refused.
func TestPackage_Arm64WithAGivenRuntime(t *testing.T) {
	rt := t.TempDir()
	os.MkdirAll(filepath.Join(rt, "bin"), 0o755)
	os.WriteFile(filepath.Join(rt, "bin", "python3.11"), []byte("arm64 interpreter"), 0o755)
	writeManifest := func(arch string) {
		b, _ := json.Marshal(RuntimeManifest{Python: "3.11.2", Arch: arch, Depends: []string{"libc6", "libssl3"}, Files: map[string]string{}})
		os.WriteFile(filepath.Join(rt, RuntimeManifestName), b, 0o644)
	}
	out := t.TempDir()
	pkg := func() ([]byte, error) {
		cmd := exec.Command("go", "run", "./packaging", "package", "--version", "0.1.0", "--arch", "arm64", "--runtime", rt, "--out", out)
		cmd.Dir = ".."
		return cmd.CombinedOutput()
	}
	writeManifest("amd64")
	if b, err := pkg(); err == nil || !strings.Contains(string(b), "is for amd64, not arm64") {
		t.Fatalf("a runtime of another architecture was packaged: %v %s", err, b)
	}
	writeManifest("arm64")
	b, err := pkg()
	if err != nil {
		t.Fatalf("%v %s", err, b)
	}
	deb := strings.TrimSpace(string(b))
	if got := strings.TrimSpace(mustRun(t, "dpkg-deb", "-f", deb, "Architecture")); got != "arm64" {
		t.Fatalf("Architecture %q", got)
	}
	if got := strings.TrimSpace(mustRun(t, "dpkg-deb", "-f", deb, "Depends")); got != "adduser, libc6, libssl3" {
		t.Fatalf("Depends %q", got)
	}
	x := t.TempDir()
	mustRun(t, "dpkg-deb", "-x", deb, x)
	ef, err := elf.Open(filepath.Join(x, "usr/lib/qubiq/slots/a/bin/qubiqd"))
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if ef.Machine != elf.EM_AARCH64 {
		t.Fatalf("qubiqd is built for %v, not arm64", ef.Machine)
	}
}
