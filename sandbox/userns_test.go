package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// nonRootEnv, when set (to a loopback port), makes the test binary the
// unprivileged daemon of TestHelper_NonRootDaemon_NetNS (TestMain).
const nonRootEnv = "QUBIQ_TEST_NONROOT_DAEMON"

// nonRootProg connects to the port given and prints the errno (or
// "connected"), then the interpreter's effective capabilities and uid.
const nonRootProg = connectProg + `
for line in open("/proc/self/status"):
    if line.startswith(("CapEff:", "CapPrm:", "CapAmb:", "Uid:")):
        print(" ".join(line.split()))
`

// nonRootChild runs, as whatever unprivileged user the test started it as,
// what the pool does: the hardening probe, then a worker's helper with
// no_new_privs and the network namespace, started as startWorker starts it
// (userNSFor), running nonRootProg. It prints the probe's network namespace
// answer and the program's output, and returns the exit code.
func nonRootChild(port string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Println("executable:", err)
		return 1
	}
	p := &Pool{selfExe: exe, homeDir: "/"}
	pr, err := p.probeHardening(context.Background(), Hardening{NoNewPrivs: HardenOn, NetNS: HardenOn, Landlock: HardenOff})
	if err != nil {
		fmt.Println("probe:", err)
		return 1
	}
	fmt.Printf("probe netns=%q nnp=%q\n", pr.NetNS, pr.NNP)
	hargs := []string{"--nnp", "--netns"}
	argv := append(append([]string{helperArg}, hargs...), "--", testPython(), "-I", "-S", "-c", nonRootProg, port)
	cmd := exec.Command(exe, argv...)
	cmd.Env = childEnv("/")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	userNSFor(cmd.SysProcAttr, hargs)
	out, err := cmd.CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		fmt.Println("helper:", err)
		return 1
	}
	return 0
}

// TestHelper_NonRootDaemon_NetNS: a daemon that is not root (the packaged
// service runs as its own user) still gives its workers a private network
// namespace, through a user namespace of their own: the probe finds the
// layer available, the worker cannot reach a host loopback listener, and
// the interpreter holds no capability (the helper's ambient CAP_SYS_ADMIN,
// valid in the worker's own user namespace only, is cleared before the
// exec) and runs as the daemon's uid.
func TestHelper_NonRootDaemon_NetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the test binary as another user needs root (the tests run as root on the test hosts)")
	}
	port := loopbackListener(t)
	dir, err := os.MkdirTemp("", "qubiq-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "sandbox.test")
	if err := copyExecutable(os.Args[0], exe); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	cmd := exec.Command(exe)
	cmd.Env = []string{nonRootEnv + "=" + strconv.Itoa(port), "PYTHON_PATH=" + testPython(), "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	got := string(out)
	if err != nil {
		t.Fatalf("the unprivileged daemon: %v:\n%s", err, got)
	}
	for _, want := range []string{
		`probe netns="" nnp=""`, // the layer is available to a daemon that is not root
		"errno 101",             // ENETUNREACH: only a downed loopback in the worker's namespace
		"CapEff: 0000000000000000", "CapPrm: 0000000000000000", "CapAmb: 0000000000000000",
		"Uid: 65534 65534 65534 65534",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in the unprivileged daemon's output:\n%s", want, got)
		}
	}
}

// copyExecutable copies the file at src to dst with mode 0755.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
