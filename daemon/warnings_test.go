package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"qubiq.dev/edge/config"
)

func loadConfig(t *testing.T, text string) *config.Daemon {
	t.Helper()
	f := filepath.Join(t.TempDir(), "qubiq.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.LoadDaemon(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
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
