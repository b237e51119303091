package daemon

import (
	"testing"
	"time"

	"qubiq.dev/edge/tagengine"
)

// The watchdog's scan-loop window is moved by the longest scan period of
// the project, so a slow scan class is not taken for a wedged loop.
func TestLongestScan(t *testing.T) {
	for _, c := range []struct {
		scans []string
		want  time.Duration
	}{
		{nil, 0},
		{[]string{"100ms", "", "1m"}, time.Minute},
		{[]string{""}, tagengine.DefaultScan},
		{[]string{"50ms", "bad"}, 50 * time.Millisecond},
	} {
		if got := longestScan(c.scans); got != c.want {
			t.Errorf("longestScan(%q) = %s, want %s", c.scans, got, c.want)
		}
	}
}

func TestRestartError(t *testing.T) {
	var err error = &restartError{reason: "firmware 1.1.0 staged"}
	ec, ok := err.(interface{ RestartExitCode() int })
	if !ok || ec.RestartExitCode() != 75 || err.Error() != "restart requested: firmware 1.1.0 staged" {
		t.Fatalf("%v", err)
	}
}
