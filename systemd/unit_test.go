package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxExposure is the bound the unit keeps (docs/appliance.md).
const maxExposure = 3.5

func analyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed on this machine")
	}
	return p
}

// verifyRoot makes a root directory holding systemd's own units, the unit
// and its drop-ins, and executables where the unit names them, so that
// `systemd-analyze verify --root` checks the unit as on an appliance.
func verifyRoot(t *testing.T, dropins map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/lib/systemd", "etc/systemd/system/qubiqd.service.d", "usr/lib/qubiq/current/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copy systemd units: %v %s", err, out)
	}
	unit, err := os.ReadFile("qubiqd.service")
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel string, b []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, rel), b, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/systemd/system/qubiqd.service", unit, 0o644)
	for name, body := range dropins {
		write("etc/systemd/system/qubiqd.service.d/"+name, []byte(body), 0o644)
	}
	exe := []byte("#!/bin/sh\nexit 0\n")
	write("usr/lib/qubiq/qubiq-slot", exe, 0o755)
	write("usr/lib/qubiq/current/bin/qubiqd", exe, 0o755)
	return root
}

func TestUnit_VerifyHasNoFindings(t *testing.T) {
	sa := analyze(t)
	drop, err := SerialDropIn([]string{"/dev/ttyUSB0", "char-ttyUSB"})
	if err != nil {
		t.Fatal(err)
	}
	for name, dropins := range map[string]map[string]string{"plain": nil, "serial": {"50-serial.conf": drop}} {
		t.Run(name, func(t *testing.T) {
			root := verifyRoot(t, dropins)
			out, err := exec.Command(sa, "verify", "--root="+root, "qubiqd.service").CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
			}
		})
	}
	// The check is real: a key systemd does not know is a finding.
	root := verifyRoot(t, map[string]string{"bad.conf": "[Service]\nNoSuchKey=1\n"})
	out, _ := exec.Command(sa, "verify", "--root="+root, "qubiqd.service").CombinedOutput()
	if !strings.Contains(string(out), "NoSuchKey") {
		t.Fatalf("verify did not report an unknown key: %s", out)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

func exposure(t *testing.T, sa, unit string) (float64, string) {
	t.Helper()
	out, err := exec.Command(sa, "security", "--offline=true", "--no-pager", unit).CombinedOutput()
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security --offline=true: %v\n%s", err, out)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, string(out)
}

func TestUnit_SecurityExposureAtMost3_5(t *testing.T) {
	sa := analyze(t)
	v, out := exposure(t, sa, "qubiqd.service")
	t.Logf("exposure %.1f", v)
	if v > maxExposure {
		t.Fatalf("exposure %.1f > %.1f:\n%s", v, maxExposure, out)
	}
	// With the serial drop-in merged in, the unit stays at 4.0 at most.
	drop, _ := SerialDropIn([]string{"/dev/ttyUSB0"})
	unit, _ := os.ReadFile("qubiqd.service")
	merged := filepath.Join(t.TempDir(), "qubiqd.service")
	_, body, _ := strings.Cut(drop, "[Service]\n")
	s := strings.Replace(string(unit), "[Install]", body+"\n[Install]", 1)
	if err := os.WriteFile(merged, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	v2, out2 := exposure(t, sa, merged)
	t.Logf("exposure with serial ports %.1f", v2)
	if v2 > 4.0 || v2 <= v {
		t.Fatalf("exposure with the serial drop-in %.1f (plain %.1f), want above plain and <= 4.0:\n%s", v2, v, out2)
	}
}

// TestUnit_Contract checks the settings the appliance relies on.
func TestUnit_Contract(t *testing.T) {
	b, err := os.ReadFile("qubiqd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, line := range []string{
		"Type=notify", "WatchdogSec=30s", "Restart=on-failure", "Delegate=yes", "StateDirectory=qubiq",
		"User=qubiq", "Environment=PYTHON_PATH=/usr/lib/qubiq/current/python/bin/python3",
		"ExecStartPre=+/usr/lib/qubiq/qubiq-slot boot ", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes", "CapabilityBoundingSet=\n",
		"SystemCallFilter=@system-service", "RestrictNamespaces=user net\n", "LockPersonality=yes",
		"ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectKernelLogs=yes",
		"RestartForceExitStatus=75", "SuccessExitStatus=75",
	} {
		if !strings.Contains(unit, line) {
			t.Errorf("unit lacks %q", line)
		}
	}
	// Every allowance is explained next to it.
	for _, allowance := range []string{"ProtectControlGroups=no", "RestrictNamespaces=", "RestrictAddressFamilies="} {
		i := strings.Index(unit, allowance)
		if i < 0 || !strings.Contains(unit[max(0, i-400):i], "# Allowance:") {
			t.Errorf("%s has no explaining comment above it", allowance)
		}
	}
}

func TestSerialDropIn(t *testing.T) {
	d, err := SerialDropIn([]string{"/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI_1-if00", "char-ttyUSB"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"PrivateDevices=no", "DevicePolicy=closed", "SupplementaryGroups=dialout", "PrivateUsers=no",
		"DeviceAllow=/dev/ttyUSB0 rw", "DeviceAllow=/dev/serial/by-id/usb-FTDI_1-if00 rw", "DeviceAllow=char-ttyUSB rw"} {
		if !strings.Contains(d, l+"\n") {
			t.Errorf("drop-in lacks %q:\n%s", l, d)
		}
	}
	for _, bad := range [][]string{nil, {"ttyUSB0"}, {"/dev/tty USB0"}, {"/dev/../etc/shadow"}, {"/dev/x\nExecStart=/bin/sh"}} {
		if _, err := SerialDropIn(bad); err == nil {
			t.Errorf("SerialDropIn(%q) accepted", bad)
		}
	}
}
