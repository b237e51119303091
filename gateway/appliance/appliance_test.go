package appliance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/backup"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/store"
)

// fakeAudit records the events; canErr makes CanAudit fail.
type fakeAudit struct {
	baseAudit // the methods of gateway.Audit the appliance does not call (nil: they panic)
	mu        sync.Mutex
	events    []gateway.AuditEvent
	canErr    error
}

type baseAudit = gateway.Audit

func (f *fakeAudit) CanAudit() error { return f.canErr }

func (f *fakeAudit) Audit(_ context.Context, _ auth.Grant, ev gateway.AuditEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	return nil
}

func (f *fakeAudit) last(t *testing.T) gateway.AuditEvent {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		t.Fatal("nothing audited")
	}
	return f.events[len(f.events)-1]
}

type fixture struct {
	t        *testing.T
	dir      string
	l        slots.Layout
	key      *firmware.SigningKey
	audit    *fakeAudit
	restarts []string
	app      *Appliance
	level    *slog.LevelVar
}

// newFixture is an appliance running 1.0.0 from slot a.
func newFixture(t *testing.T) *fixture {
	d := t.TempDir()
	f := &fixture{t: t, dir: d, l: slots.Layout{Root: filepath.Join(d, "usr/lib/qubiq"), DataDir: filepath.Join(d, "data")},
		audit: &fakeAudit{}, level: new(slog.LevelVar)}
	priv, pub, err := firmware.Keygen("release", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.key, _ = firmware.ParseSigningKey(priv)
	keys := filepath.Join(d, "trusted")
	os.WriteFile(keys, pub, 0o644)
	tree := f.tree("1.0.0")
	if err := os.Rename(tree, f.l.SlotDir("a")); err != nil {
		os.MkdirAll(filepath.Dir(f.l.SlotDir("a")), 0o755)
		if err := os.Rename(tree, f.l.SlotDir("a")); err != nil {
			t.Fatal(err)
		}
	}
	_, raw, err := firmware.SlotManifest(firmware.BuildOptions{SlotDir: f.l.SlotDir("a"), Version: "1.0.0", Arch: runtime.GOARCH, SchemaVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.l.SlotDir("a"), slots.ManifestFile), raw, 0o644)
	os.MkdirAll(f.l.DataDir, 0o700)
	if err := slots.Activate(f.l, "a", "test"); err != nil {
		t.Fatal(err)
	}
	f.app = New(Options{Settings: Settings{SlotsRoot: f.l.Root, TrustedKeys: keys, MaxSize: 64 << 20, MaxBackup: 64 << 20},
		DataDir: f.l.DataDir, ApplianceID: "t-01", Version: "1.0.0", Audit: f.audit, Level: f.level, Slot: "a",
		Restart: func(r string) { f.restarts = append(f.restarts, r) }})
	return f
}

func (f *fixture) tree(version string) string {
	dir := filepath.Join(f.dir, "src", version)
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin/qubiqd"), []byte("#!/bin/sh\necho "+version+"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin/qubiqctl"), []byte("#!/bin/sh\n"), 0o755)
	return dir
}

func (f *fixture) bundle(version, arch string, key *firmware.SigningKey) []byte {
	var b bytes.Buffer
	if _, err := firmware.Build(&b, firmware.BuildOptions{SlotDir: f.tree(version), Version: version, Arch: arch, SchemaVersion: 1, Key: key}); err != nil {
		f.t.Fatal(err)
	}
	return b.Bytes()
}

func grant() auth.Grant { return auth.Full("tech", auth.RealmPlatform, "rest") }

func TestFlash_StagesAuditsAndRestarts(t *testing.T) {
	f := newFixture(t)
	res, err := f.app.Flash(context.Background(), grant(), bytes.NewReader(f.bundle("1.1.0", runtime.GOARCH, f.key)), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != "1.1.0" || res.Slot != "b" || res.Key != "release" || !res.RestartRequired || res.Previous != "1.0.0" {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.l.DataDir, firmware.StageDir, firmware.PendingFile)); err != nil {
		t.Fatalf("nothing staged: %v", err)
	}
	if len(f.restarts) != 1 || !strings.Contains(f.restarts[0], "firmware 1.1.0 staged for slot b") {
		t.Fatalf("restarts %q", f.restarts)
	}
	if ev := f.audit.last(t); ev.Action != "firmware.flash" || ev.Result != "ok" || ev.Target != "bundle 1.1.0" {
		t.Fatalf("audit %+v", ev)
	}
	st, err := f.app.FirmwareStatus(context.Background())
	if err != nil || st.Running != "a" || st.Active != "a" || st.Last == nil || st.Last.Action != "flash" || !st.Last.OK {
		t.Fatalf("status %+v %v", st, err)
	}
	// The daemon is restarting: a second upload is refused, busy.
	_, err = f.app.Flash(context.Background(), grant(), bytes.NewReader(f.bundle("1.2.0", runtime.GOARCH, f.key)), false)
	var r *gateway.Refusal
	if !errors.As(err, &r) || r.Kind != "busy" {
		t.Fatalf("a flash while restarting: %v", err)
	}
}

func TestFlash_RefusalsAreAuditedAndDoNotRestart(t *testing.T) {
	f := newFixture(t)
	priv, _, _ := firmware.Keygen("stranger", nil)
	stranger, _ := firmware.ParseSigningKey(priv)
	for _, c := range []struct {
		name, kind string
		b          []byte
		force      bool
	}{
		{"unknown key", "unknown_key", f.bundle("1.1.0", runtime.GOARCH, stranger), false},
		{"downgrade", "downgrade", f.bundle("0.9.0", runtime.GOARCH, f.key), false},
		{"wrong arch, forced", "arch", f.bundle("1.1.0", "mips64", f.key), true},
		{"not a bundle", "format", []byte("not a bundle at all"), false},
	} {
		_, err := f.app.Flash(context.Background(), grant(), bytes.NewReader(c.b), c.force)
		var r *gateway.Refusal
		if !errors.As(err, &r) || r.Kind != c.kind {
			t.Errorf("%s: %v, want a refusal of kind %s", c.name, err, c.kind)
			continue
		}
		if ev := f.audit.last(t); ev.Action != "firmware.flash" || ev.Result != c.kind || ev.Detail == "" {
			t.Errorf("%s: audit %+v", c.name, ev)
		}
	}
	if len(f.restarts) != 0 {
		t.Fatalf("a refused bundle restarted the daemon: %q", f.restarts)
	}
	if _, err := os.Stat(filepath.Join(f.l.DataDir, firmware.StageDir)); err == nil {
		t.Fatalf("a refused bundle left %s", firmware.StageDir)
	}
	// Nothing is flashed unaudited.
	f.audit.canErr = gateway.ErrUnavailable
	if _, err := f.app.Flash(context.Background(), grant(), bytes.NewReader(f.bundle("1.1.0", runtime.GOARCH, f.key)), false); !errors.Is(err, gateway.ErrUnavailable) {
		t.Fatalf("flash without an audit log: %v", err)
	}
}

func TestFlash_OutsideTheSlotsIsRefused(t *testing.T) {
	f := newFixture(t)
	app := New(Options{Settings: f.app.opts.Settings, DataDir: f.l.DataDir, Audit: f.audit}) // the test binary is in no slot
	_, err := app.Flash(context.Background(), grant(), bytes.NewReader(f.bundle("1.1.0", runtime.GOARCH, f.key)), false)
	var r *gateway.Refusal
	if !errors.As(err, &r) || r.Kind != "no_slots" {
		t.Fatalf("flash of a development build: %v", err)
	}
}

func TestNew_RemovesACutUploadsSpool(t *testing.T) {
	f := newFixture(t)
	stage := filepath.Join(f.l.DataDir, firmware.StageDir)
	os.MkdirAll(stage, 0o700)
	os.WriteFile(filepath.Join(stage, ".incoming-123.qfw"), []byte("half"), 0o600)
	New(f.app.opts)
	if m, _ := filepath.Glob(filepath.Join(stage, "*")); len(m) != 0 {
		t.Fatalf("left %v", m)
	}
}

func TestSetLogLevel(t *testing.T) {
	f := newFixture(t)
	l, err := f.app.SetLogLevel(context.Background(), grant(), "Debug")
	if err != nil || l != "DEBUG" || f.level.Level() != slog.LevelDebug || f.app.LogLevel() != "DEBUG" {
		t.Fatalf("set debug: %q %v (level %v)", l, err, f.level.Level())
	}
	if ev := f.audit.last(t); ev.Action != "log.level" || ev.After.(map[string]string)["before"] != "INFO" {
		t.Fatalf("audit %+v", ev)
	}
	if _, err := f.app.SetLogLevel(context.Background(), grant(), "loud"); !errors.Is(err, gateway.ErrInvalid) || f.level.Level() != slog.LevelDebug {
		t.Fatalf("set loud: %v (level %v)", err, f.level.Level())
	}
}

// A backup of a running store, staged as a restore on another appliance
// with its options, is applied at that appliance's next start.
func TestBackupStageAndApplyRestore(t *testing.T) {
	f := newFixture(t)
	db, err := store.Open(filepath.Join(f.l.DataDir, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PutMeta("marker", []byte("from t-01")); err != nil {
		t.Fatal(err)
	}
	f.app.opts.Store = db
	var bk bytes.Buffer
	if err := f.app.Backup(context.Background(), grant(), &bk, gateway.BackupRequest{}); err != nil {
		t.Fatal(err)
	}
	if ev := f.audit.last(t); ev.Action != "appliance.backup" || ev.Result != "ok" {
		t.Fatalf("audit %+v", ev)
	}

	other := t.TempDir()
	var restarts []string
	app := New(Options{Settings: f.app.opts.Settings, DataDir: other, Audit: f.audit, Slot: "a", Restart: func(r string) { restarts = append(restarts, r) }})
	broken := bytes.Clone(bk.Bytes())
	broken[len(broken)/2] ^= 0xff
	if _, err := app.StageRestore(context.Background(), grant(), bytes.NewReader(broken), gateway.RestoreRequest{}); err == nil {
		t.Fatal("a damaged backup was staged")
	}
	if _, err := os.Stat(filepath.Join(other, backup.PendingDir, backup.PendingFile)); err == nil {
		t.Fatal("a damaged backup left a pending file")
	}
	staged, err := app.StageRestore(context.Background(), grant(), bytes.NewReader(bk.Bytes()), gateway.RestoreRequest{KeepCredentials: true})
	if err != nil || staged.ApplianceID != "t-01" || !staged.RestartRequired || len(restarts) != 1 {
		t.Fatalf("stage: %+v %v %q", staged, err, restarts)
	}
	ok, err := ApplyPendingRestore(context.Background(), other, f.app.opts.Settings, slog.New(slog.DiscardHandler))
	if err != nil || !ok {
		t.Fatalf("apply: %v %v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(other, backup.PendingDir, restoreOptionsFile)); err == nil {
		t.Fatal("the restore's options outlived it")
	}
	rdb, err := store.Open(filepath.Join(other, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if m, _ := rdb.Meta("marker"); string(m) != "from t-01" {
		t.Fatalf("restored marker %q", m)
	}
	if ok, err := ApplyPendingRestore(context.Background(), other, f.app.opts.Settings, slog.New(slog.DiscardHandler)); ok || err != nil {
		t.Fatalf("a second apply: %v %v", ok, err)
	}
}

func TestParseSettings(t *testing.T) {
	parse := func(y string) (Settings, error) {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(y), &doc); err != nil {
			t.Fatal(err)
		}
		c := &config.Daemon{File: "/etc/qubiq/qubiq.yaml"}
		for i := 0; i+1 < len(doc.Content[0].Content); i += 2 {
			switch doc.Content[0].Content[i].Value {
			case "firmware":
				c.Firmware = *doc.Content[0].Content[i+1]
			case "log":
				c.Log = *doc.Content[0].Content[i+1]
			}
		}
		return ParseSettings(c)
	}
	s, err := parse("x: 1\n")
	if err != nil || s.SlotsRoot != slots.DefaultRoot || s.TrustedKeys != firmware.DefaultTrustedKeys || s.MaxSize != firmware.DefaultMaxSize ||
		s.ConfirmAfter != DefaultConfirmAfter || s.TrialTimeout != DefaultTrialTimeout || s.LogLevel != slog.LevelInfo {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	s, err = parse("firmware: {slots_root: slots, trusted_keys: /k, confirm_after: 1s, trial_timeout: 5s, max_size: 2MiB}\nlog: {level: warn, output: stderr}\n")
	if err != nil || s.SlotsRoot != "/etc/qubiq/slots" || s.TrustedKeys != "/k" || s.ConfirmAfter != time.Second || s.MaxSize != 2<<20 ||
		s.LogLevel != slog.LevelWarn || s.LogOutput != "stderr" {
		t.Fatalf("set: %+v %v", s, err)
	}
	for y, want := range map[string]string{
		"firmware: {trusted_key: /k}\n":                       "field trusted_key not found",
		"firmware: {confirm_after: 10m, trial_timeout: 5m}\n": "trial_timeout 5m0s must be longer than confirm_after 10m0s",
		"log: {level: loud}\n":                                `log.level: log level "loud"`,
		"log: {output: syslog}\n":                             `log.output "syslog"`,
		"firmware: [a]\n":                                     "firmware: want a mapping",
	} {
		if _, err := parse(y); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", y, err, want)
		}
	}
}

// A backup carries the project file and the script files it names beside
// or below it; one elsewhere is left to the store (which holds its code).
func TestProjectFiles(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "scripts"), 0o755)
	for _, f := range []string{"project.yaml", "scripts/a.py", "b.py"} {
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
	outside := filepath.Join(t.TempDir(), "c.py")
	os.WriteFile(outside, []byte("x"), 0o644)
	p := &config.Project{File: filepath.Join(dir, "project.yaml"), Scripts: []config.ScriptConfig{
		{Module: "a", File: "scripts/a.py"}, {Module: "b", File: "b.py"}, {Module: "b2", File: "b.py"},
		{Module: "c", File: outside}, {Module: "d", File: "missing.py"}, {Module: "e"}}}
	a := New(Options{ProjectFile: p.File, Project: func() *config.Project { return p }})
	got := strings.Join(a.projectFiles(), " ")
	if want := "project.yaml " + filepath.Join("scripts", "a.py") + " b.py"; got != want {
		t.Fatalf("project files %q, want %q", got, want)
	}
}

// A backup sealed with a passphrase is staged only with that passphrase,
// and the next start restores its secrets with it.
func TestBackupWithAPassphrase(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.l.DataDir, "secrets.key"), bytes.Repeat([]byte{7}, 32), 0o600)
	db, err := store.Open(filepath.Join(f.l.DataDir, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f.app.opts.Store = db
	var bk bytes.Buffer
	if err := f.app.Backup(context.Background(), grant(), &bk, gateway.BackupRequest{Passphrase: []byte("correct horse")}); err != nil {
		t.Fatal(err)
	}
	if names := entries(t, bk.Bytes()); !names["secrets/secrets.key.sealed"] || names["secrets/secrets.key"] {
		t.Fatalf("the sealed backup's entries: %v", names)
	}
	if ev := f.audit.last(t); ev.After.(map[string]any)["secrets"] != "sealed" {
		t.Fatalf("audit %+v", ev)
	}
	other := t.TempDir()
	app := New(Options{Settings: f.app.opts.Settings, DataDir: other, Audit: f.audit, Slot: "a"})
	for _, pass := range []string{"", "wrong horse"} {
		_, err := app.StageRestore(context.Background(), grant(), bytes.NewReader(bk.Bytes()), gateway.RestoreRequest{Passphrase: []byte(pass)})
		var r *gateway.Refusal
		if !errors.As(err, &r) || r.Kind != "passphrase" {
			t.Fatalf("staged with passphrase %q: %v", pass, err)
		}
	}
	if _, err := app.StageRestore(context.Background(), grant(), bytes.NewReader(bk.Bytes()), gateway.RestoreRequest{Passphrase: []byte("correct horse")}); err != nil {
		t.Fatal(err)
	}
	if ok, err := ApplyPendingRestore(context.Background(), other, f.app.opts.Settings, slog.New(slog.DiscardHandler)); !ok || err != nil {
		t.Fatalf("apply: %v %v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(other, backup.PendingDir, restoreOptionsFile)); err == nil {
		t.Fatal("the passphrase outlived the restore on disk")
	}
}

// entries lists a backup's entry names.
func entries(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = true
	}
}
