package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestProblems_EveryProblemWithItsFileAndLine: a wrapper of several
// problems prefixes each of them (none loses its file and line), "FILE:
// line N:" is written "FILE:N:", also behind a prefix, and a word such as
// "value: line 3" that is not a file is left alone.
func TestProblems_EveryProblemWithItsFileAndLine(t *testing.T) {
	tag := fmt.Errorf("/srv/p.yaml:4: tag \"A/B\": %w", errors.Join(errors.New(`unknown type "float65"`), errors.New(`scan "x": want a positive duration such as 1s`)))
	dec := fmt.Errorf("/srv/q.yaml: %w", errors.Join(errors.New(`line 3: unknown key "pyton"`), errors.New(`line 7: store.open_timeout: bad duration "5 seconds"`)))
	start := fmt.Errorf("start service: %w", fmt.Errorf("/srv/p.yaml: %w", errors.Join(errors.New(`line 9: unknown key "typ"`))))
	got := Problems(errors.Join(tag, dec, start, errors.New(`alarm "x": value: line 3: is odd`)))
	want := []string{
		`/srv/p.yaml:4: tag "A/B": unknown type "float65"`,
		`/srv/p.yaml:4: tag "A/B": scan "x": want a positive duration such as 1s`,
		`/srv/q.yaml:3: unknown key "pyton"`,
		`/srv/q.yaml:7: store.open_timeout: bad duration "5 seconds"`,
		`start service: /srv/p.yaml:9: unknown key "typ"`,
		`alarm "x": value: line 3: is odd`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Problems =\n%q\nwant\n%q", got, want)
	}
	if Problems(nil) != nil {
		t.Error("a nil error has problems")
	}
	if n := ProblemLine(got[2]); n != 3 {
		t.Errorf("ProblemLine(%q) = %d, want 3", got[2], n)
	}
}

// TestLoadDaemon_EveryProblemAtItsLine: the daemon config's problems of
// decoding and of meaning alike read FILE:LINE: what, and the config is
// returned decoded as far as they allow (so a check goes on to the
// project).
func TestLoadDaemon_EveryProblemAtItsLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qubiq.yaml")
	doc := "data_dir: data\npyton: {}\npython:\n  replicas: -1\nstore:\n  open_timeout: 5 seconds\nsecurity:\n  baseline_write_level: operator\nproject: p.yaml\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadDaemon(path)
	if err == nil || cfg == nil {
		t.Fatalf("LoadDaemon = %v, %v; want the config and its problems", cfg, err)
	}
	if cfg.Project != filepath.Join(filepath.Dir(path), "p.yaml") {
		t.Errorf("project = %q: the config was not decoded as far as it goes", cfg.Project)
	}
	got := Problems(err)
	for _, want := range []string{path + `:2: unknown key "pyton"`, path + `:6: store.open_timeout: bad duration "5 seconds"`,
		path + `:4: python.replicas -1: want >= 1`, path + `:8: security.baseline_write_level "operator"`} {
		if !slices.ContainsFunc(got, func(l string) bool { return len(l) >= len(want) && l[:len(want)] == want }) {
			t.Errorf("problems lack %q:\n%q", want, got)
		}
	}
	shape := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:\d+: `)
	for _, l := range got {
		if !shape.MatchString(l) {
			t.Errorf("problem %q is not FILE:LINE: what", l)
		}
	}
}

// TestLoadDaemon_ListenEnvironment: QUBIQ_HTTP_LISTEN and
// QUBIQ_DIAGNOSTICS_LISTEN replace http.listen and diagnostics.listen
// (docs/config.md, "Environment"), and are checked as the keys are.
func TestLoadDaemon_ListenEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qubiq.yaml")
	if err := os.WriteFile(path, []byte("data_dir: data\nhttp: {listen: 127.0.0.1:8080}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUBIQ_HTTP_LISTEN", "127.0.0.1:18080")
	t.Setenv("QUBIQ_DIAGNOSTICS_LISTEN", "off")
	d, err := LoadDaemon(path)
	if err != nil || d.HTTP.Listen != "127.0.0.1:18080" || d.Diagnostics.Listen != "off" {
		t.Fatalf("LoadDaemon = %+v, %v; want the environment's listeners", d, err)
	}
	t.Setenv("QUBIQ_DIAGNOSTICS_LISTEN", "nohost")
	if _, err := LoadDaemon(path); err == nil || !strings.Contains(err.Error(), `diagnostics.listen "nohost"`) {
		t.Fatalf("a bad QUBIQ_DIAGNOSTICS_LISTEN: %v", err)
	}
}
