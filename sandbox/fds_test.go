package sandbox

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPool_Start_InheritedFDsDoNotReachWorkers: a descriptor the daemon
// inherited without close-on-exec (from a shell or supervisor) is not open
// in a worker; only stdio and the transport are (attack report: stray fds
// reached the workers).
func TestPool_Start_InheritedFDsDoNotReachWorkers(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(r.Fd(), unix.F_SETFD, 0); err != nil { // as if inherited
		t.Fatal(err)
	}
	leaked, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	p := startPool(t, testConfig(t), newFakeServices())
	ws := p.Workers()
	if len(ws) == 0 || ws[0].PID == 0 {
		t.Fatalf("no worker: %+v", ws)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", ws[0].PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", ws[0].PID, e.Name()))
		if target == leaked {
			t.Fatalf("the worker holds the daemon's inherited fd %s (%s)", e.Name(), target)
		}
	}
}
