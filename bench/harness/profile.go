package harness

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ProfileDir is where profiles go: $BENCH_PROFILE_DIR, else build/bench/
// profiles of the repository.
func ProfileDir() string {
	if d := os.Getenv("BENCH_PROFILE_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "build", "bench", "profiles")
}

// Profile fetches a heap profile, a CPU profile of dur and then a heap
// profile again from the net/http/pprof at addr (a daemon built with -tags
// benchprofile and started with Options.Profile) into ProfileDir as
// NAME.heap-base.pprof, NAME.cpu.pprof and NAME.heap.pprof: `go tool pprof
// -sample_index=alloc_space -base NAME.heap-base.pprof BINARY
// NAME.heap.pprof` shows what was allocated during the window alone. It returns when both are written; errors are logged,
// not fatal (a profile is an aid, not a figure).
func Profile(t testing.TB, addr, name string, dur time.Duration) {
	dir := ProfileDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("profile: %v", err)
		return
	}
	get := func(path, file string) {
		c := http.Client{Timeout: dur + 30*time.Second}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			t.Logf("profile %s: %v", path, err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			t.Logf("profile: %v", err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			t.Logf("profile %s: %v", path, err)
			return
		}
		t.Logf("profile: wrote %s", f.Name())
	}
	get("/debug/pprof/heap", name+".heap-base.pprof")
	get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(dur.Seconds())), name+".cpu.pprof")
	get("/debug/pprof/heap?gc=1", name+".heap.pprof")
}

// ProfileWindow starts Profile of the daemon for dur in the background
// when the benchmark runs with BENCH_PROFILE=NAME (make profile-NAME) and
// the daemon serves pprof, naming the files NAME-what; the returned
// function waits for it. Without BENCH_PROFILE it does nothing.
func ProfileWindow(t testing.TB, d *Daemon, what string, dur time.Duration) (wait func()) {
	prof := os.Getenv("BENCH_PROFILE")
	if prof == "" || d.Pprof == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Profile(t, d.Pprof, prof+"-"+what, max(dur-2*time.Second, time.Second))
	}()
	return func() { <-done }
}
