package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/config"
)

// loadConfig loads text as a daemon config file of its own, failing t on
// any problem.
func loadConfig(t *testing.T, text string) *config.Daemon {
	t.Helper()
	c, err := loadConfigErr(t, text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loadConfigErr loads text as a daemon config file of its own.
func loadConfigErr(t *testing.T, text string) (*config.Daemon, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "qubiq.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return config.LoadDaemon(f)
}

// A block no part acts on is a warning naming it and its line; a block a
// part of the same name runs is not; a worker limit at unlimited is
// warned by the python section's predicate.
func TestConfigWarnings(t *testing.T) {
	c := loadConfig(t, `appliance_id: a
data_dir: data
python:
  memory_max: unlimited
  cpu_max: unlimited
mqtt:
  brokers: [tcp://127.0.0.1:1883]
store: {open_timeout: 2s}
`)
	parts := []string{"store", "service", "flows", "metrics", "api"}
	got := configWarnings(c, parts)
	want := []string{
		"python.memory_max: unlimited: script workers run without that limit",
		"python.cpu_max: unlimited: script workers run without that limit",
		c.File + ":6: mqtt: this qubiqd does not act on this block; it is ignored",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A part named after the section acts on it: no warning.
	if got := configWarnings(c, append(parts, "mqtt")); slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "mqtt") }) {
		t.Errorf("with an mqtt part: %q, want no mqtt warning", got)
	}
	// Nothing written, nothing warned.
	if got := configWarnings(loadConfig(t, "appliance_id: a\n"), parts); len(got) != 0 {
		t.Errorf("plain config: %q, want no warning", got)
	}
}

// Every top-level key of the daemon config has an owner the warnings know:
// a predicate in sectionChecks, or a part of the same name. A key added to
// config.Daemon without one would be warned as "not acted on" at every
// start: this test names it first. partNamed lists the keys a part of
// their name acts on; notActedOn the keys this build reads and does not
// act on yet (warned, on purpose).
func TestSectionChecks_EveryConfigKeyHasAnOwner(t *testing.T) {
	partNamed := []string{"store", "mqtt"}
	notActedOn := []string{} // every key this build reads has a part acting on it
	typ := reflect.TypeFor[config.Daemon]()
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			continue
		}
		_, checked := sectionChecks[key]
		if !checked && !slices.Contains(partNamed, key) && !slices.Contains(notActedOn, key) {
			t.Errorf("config key %q has no owner for the health warnings: add it to sectionChecks (daemon/warnings.go) with the predicate its part sets, or nil", key)
		}
	}
}

// TestBuiltParts_AreNewsParts: the part names Check warns against are the
// ones New builds, in order (a part added to New and not here would make
// --check-config warn about a block the daemon acts on).
func TestBuiltParts_AreNewsParts(t *testing.T) {
	src, err := os.ReadFile("daemon.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	i := strings.Index(body, "err = s.parts.start(ctx,")
	j := strings.Index(body[i:], "\n\t)")
	if i < 0 || j < 0 {
		t.Fatal("New's part list not found in daemon.go")
	}
	var names []string
	for _, line := range strings.Split(body[i:i+j], "\n") {
		if _, rest, ok := strings.Cut(line, `part{name: "`); ok {
			names = append(names, rest[:strings.Index(rest, `"`)])
		}
	}
	if !slices.Equal(names, builtParts) {
		t.Errorf("New builds %q, builtParts says %q", names, builtParts)
	}
}

// TestCheck_LogsTheStartsWarnings: --check-config says what a start would
// warn about (here a worker limit turned off) and still passes.
func TestCheck_LogsTheStartsWarnings(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "qubiq.yaml")
	if err := os.WriteFile(f, []byte("data_dir: data\npython:\n  memory_max: unlimited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if err := Check(f, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "python.memory_max: unlimited") {
		t.Errorf("check logged %q, want the memory_max warning", buf.String())
	}
	// An interpreter that is not there: still ok, but said.
	t.Setenv("PYTHON_PATH", filepath.Join(dir, "no-such-python"))
	buf.Reset()
	if err := Check(f, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "no-such-python") || !strings.Contains(buf.String(), "runtime_missing") {
		t.Errorf("check logged %q, want the missing interpreter named", buf.String())
	}
}
