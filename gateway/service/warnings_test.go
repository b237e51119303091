package service

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// A warning is kept once, in order, and logged once at level WARN.
func TestService_Warn(t *testing.T) {
	var log bytes.Buffer
	s := &Service{log: slog.New(slog.NewTextHandler(&log, nil))}
	s.Warn("python.pids_max: unlimited: script workers run without that limit")
	s.Warn("escape hatch on")
	s.Warn("python.pids_max: unlimited: script workers run without that limit")
	want := []string{"python.pids_max: unlimited: script workers run without that limit", "escape hatch on"}
	if got := s.Warnings(); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 2 {
		t.Errorf("logged %d warnings, want 2:\n%s", n, log.String())
	}
	got := s.Warnings()
	got[0] = "changed"
	if s.Warnings()[0] == "changed" {
		t.Error("Warnings returned the service's own slice")
	}
}
