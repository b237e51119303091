package sandbox

import (
	"errors"
	"os"
	"testing"
)

func TestRunStats_CountByResult(t *testing.T) {
	var s runStats
	s.countResult(nil)
	s.countResult(nil)
	s.countResult(&RunError{Kind: KindTimeout})
	s.countResult(errors.Join(errors.New("wrapped"), &RunError{Kind: KindBusy}))
	s.countResult(errors.New("no kind"))
	want := map[string]uint64{RunOK: 2, KindTimeout: 1, KindBusy: 1, "other": 1}
	if len(s.byResult) != len(want) {
		t.Errorf("results %v, want %v", s.byResult, want)
	}
	for k, n := range want {
		if s.byResult[k] != n {
			t.Errorf("%s = %d, want %d", k, s.byResult[k], n)
		}
	}
}

func TestRSS_OwnProcess(t *testing.T) {
	if n := rss(os.Getpid()); n < 1<<20 {
		t.Errorf("rss of this test process = %d bytes, want at least 1 MiB", n)
	}
	if n := rss(-1); n != 0 {
		t.Errorf("rss of no process = %d, want 0", n)
	}
}
