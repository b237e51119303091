package firmware

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"qubiq.dev/edge/slots"
)

// TestMain doubles as the helper process of the power-cut tests: with
// QUBIQ_FW_HELPER set it runs one flash step and SIGKILLs itself at the
// crash point named by QUBIQ_FW_CRASH, as a power cut would stop it.
func TestMain(m *testing.M) {
	if step := os.Getenv("QUBIQ_FW_HELPER"); step != "" {
		os.Exit(helper(step))
	}
	os.Exit(m.Run())
}

func helper(step string) int {
	point := os.Getenv("QUBIQ_FW_CRASH")
	crashAt = func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	l := slots.Layout{Root: os.Getenv("QUBIQ_FW_ROOT"), DataDir: os.Getenv("QUBIQ_FW_DATA")}
	keys, err := LoadTrustedKeys(os.Getenv("QUBIQ_FW_KEYS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := FlashOptions{Layout: l, Keys: keys}
	switch step {
	case "flash":
		b, _ := os.ReadFile(os.Getenv("QUBIQ_FW_BUNDLE"))
		_, err = Flash(context.Background(), bytes.NewReader(b), opts)
	case "install":
		_, _, err = InstallPending(context.Background(), opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runHelper runs one step in a child process that kills itself at point.
func (f *fixture) runHelper(t *testing.T, step, point, bundle string) (killed bool) {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "keys")
	var pub []byte
	for name, k := range f.keys {
		pub = append(pub, fmt.Appendf(nil, "%s %s\n", name, b64(k))...)
	}
	os.WriteFile(keys, pub, 0o644)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "QUBIQ_FW_HELPER="+step, "QUBIQ_FW_CRASH="+point, "QUBIQ_FW_ROOT="+f.l.Root,
		"QUBIQ_FW_DATA="+f.l.DataDir, "QUBIQ_FW_KEYS="+keys, "QUBIQ_FW_BUNDLE="+bundle)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", step, err, out)
	}
	return false
}

// bootable checks what a start after the power cut does: qubiq-slot's
// InstallPending and Boot succeed, current names a slot whose files all
// match its manifest, and its daemon runs.
func (f *fixture) bootable(t *testing.T) string {
	t.Helper()
	if _, _, err := InstallPending(context.Background(), f.opts()); err != nil {
		t.Fatalf("install pending after the cut: %v", err)
	}
	if _, err := slots.Boot(f.l, slots.BootOptions{}); err != nil {
		t.Fatalf("boot after the cut: %v", err)
	}
	cur, err := slots.CurrentSlot(f.l)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifySlot(f.l, cur); err != nil {
		t.Fatalf("current slot %s is not intact: %v", cur, err)
	}
	out, err := exec.Command(filepath.Join(f.l.Current(), "bin", "qubiqd")).Output()
	if err != nil {
		t.Fatalf("the current slot's daemon does not run: %v", err)
	}
	return string(bytes.TrimSpace(out))
}

func TestPowerCut_KillAtEveryPointLeavesABootableSlot(t *testing.T) {
	points := []struct{ step, point, want string }{
		{"flash", "flash-spooling", "qubiqd 1.0.0"},      // upload half spooled: nothing staged
		{"flash", "flash-spooled", "qubiqd 1.0.0"},       // spooled, not yet staged
		{"install", "install-unpacking", "qubiqd 1.1.0"}, // the next start installs it again
		{"install", "install-unpacked", "qubiqd 1.1.0"},
		{"install", "install-old-moved", "qubiqd 1.1.0"},
		{"install", "install-new-in-place", "qubiqd 1.1.0"},
		{"install", "install-switched", "qubiqd 1.1.0"},
	}
	for _, p := range points {
		t.Run(p.point, func(t *testing.T) {
			f := newFixture(t)
			// slot b holds an older install, so that "old moved" has something to move
			f.flashAndInstall(f.bundle("1.0.5", runtime.GOARCH, "", f.key), f.opts())
			slots.Confirm(f.l, "b")
			slots.Activate(f.l, "a", "back to a for the test")
			bundle := filepath.Join(t.TempDir(), "b.qfw")
			os.WriteFile(bundle, f.bundle("1.1.0", runtime.GOARCH, "", f.key), 0o600)
			if p.step == "install" {
				if f.runHelper(t, "flash", "", bundle) {
					t.Fatal("flash killed without a crash point")
				}
			}
			if !f.runHelper(t, p.step, p.point, bundle) {
				t.Fatalf("helper was not killed at %s", p.point)
			}
			got, want := f.bootable(t), p.want
			if got != want {
				t.Fatalf("after a kill at %s the appliance runs %q, want %q", p.point, got, want)
			}
			// and the interrupted flash can be done again
			if want == "qubiqd 1.0.0" {
				f.runHelper(t, "flash", "", bundle)
				if got := f.bootable(t); got != "qubiqd 1.1.0" {
					t.Fatalf("re-flash after the cut runs %q", got)
				}
			}
			for _, leftover := range []string{".a.new", ".a.old", ".b.new", ".b.old"} {
				if _, err := os.Stat(filepath.Join(f.l.Root, "slots", leftover)); err == nil {
					t.Errorf("%s left behind", leftover)
				}
			}
		})
	}
}
