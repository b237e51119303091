package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadText(t *testing.T, text string) (*Daemon, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "qubiq.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadDaemon(f)
}

func TestLoadDaemon_Diagnostics(t *testing.T) {
	d, err := loadText(t, "appliance_id: a\n")
	if err != nil {
		t.Fatal(err)
	}
	if d.Diagnostics != (Diagnostics{Listen: "127.0.0.1:9464"}) {
		t.Errorf("default: %+v, want loopback 9464, no pprof, not explicit", d.Diagnostics)
	}
	if len(d.Sections) != 1 || d.Sections[0] != (Section{Key: "appliance_id", Line: 1}) {
		t.Errorf("sections %+v", d.Sections)
	}
	d, err = loadText(t, "diagnostics: {listen: \"[::1]:9500\", pprof: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	if d.Diagnostics != (Diagnostics{Listen: "[::1]:9500", Pprof: true, Explicit: true}) {
		t.Errorf("explicit: %+v", d.Diagnostics)
	}
	for text, want := range map[string]string{
		"diagnostics: {listen: \"0.0.0.0:9464\", pprof: true}\n":  `diagnostics.pprof: true is served on a loopback address only, and diagnostics.listen "0.0.0.0:9464" is not one`,
		"diagnostics: {listen: off, pprof: true}\n":               "diagnostics.pprof: true needs a diagnostics listener",
		"diagnostics: {listen: \"127.0.0.1\"}\n":                  `diagnostics.listen "127.0.0.1": want host:port or off`,
		"diagnostics: {listen: \"127.0.0.1:99999\"}\n":            `port "99999" is not a number from 0 to 65535`,
		"diagnostics: {listen: \"127.0.0.1:1\", metrics: true}\n": `unknown key "metrics"`,
	} {
		if _, err := loadText(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", text, err, want)
		}
	}
	if d, err := loadText(t, "diagnostics: {listen: \"0.0.0.0:9464\"}\n"); err != nil || d.Diagnostics.Listen != "0.0.0.0:9464" {
		t.Errorf("metrics on all addresses without pprof: %+v %v, want allowed", d, err)
	}
}
