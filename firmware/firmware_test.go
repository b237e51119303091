package firmware

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"qubiq.dev/edge/firmware/qfw"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"qubiq.dev/edge/slots"
)

type fixture struct {
	t    *testing.T
	l    slots.Layout
	key  *SigningKey
	keys TrustedKeys
	src  string // where slot trees are made
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	d := t.TempDir()
	f := &fixture{t: t, l: slots.Layout{Root: filepath.Join(d, "usr/lib/qubiq"), DataDir: filepath.Join(d, "var/lib/qubiq")}, src: filepath.Join(d, "src")}
	priv, pub, err := Keygen("test-release", nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.key, err = ParseSigningKey(priv); err != nil {
		t.Fatal(err)
	}
	if f.keys, err = ParseTrustedKeys(pub); err != nil {
		t.Fatal(err)
	}
	// slot a, as the package installs it, running 1.0.0
	tree := f.tree("1.0.0")
	copyTree(t, tree, f.l.SlotDir("a"))
	_, raw, err := SlotManifest(BuildOptions{SlotDir: f.l.SlotDir("a"), Version: "1.0.0", Arch: runtime.GOARCH, SchemaVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.l.SlotDir("a"), slots.ManifestFile), raw, 0o644)
	if err := slots.Activate(f.l, "a", "test install"); err != nil {
		t.Fatal(err)
	}
	return f
}

// tree makes a slot tree for version: bin/qubiqd (a script printing the
// version), a python dir with a link, some bulk.
func (f *fixture) tree(version string) string {
	dir := filepath.Join(f.src, version)
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.MkdirAll(filepath.Join(dir, "python/bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin/qubiqd"), []byte("#!/bin/sh\necho qubiqd "+version+"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin/qubiqctl"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "python/bin/python3.11"), bytes.Repeat([]byte("py"+version), 5000), 0o755)
	os.Symlink("python3.11", filepath.Join(dir, "python/bin/python3"))
	return dir
}

func (f *fixture) bundle(version, arch, minFrom string, key *SigningKey) []byte {
	f.t.Helper()
	var buf bytes.Buffer
	_, err := Build(&buf, BuildOptions{SlotDir: f.tree(version), Version: version, Arch: arch, MinFromVersion: minFrom, SchemaVersion: 1, Key: key})
	if err != nil {
		f.t.Fatal(err)
	}
	return buf.Bytes()
}

func (f *fixture) opts() FlashOptions { return FlashOptions{Layout: f.l, Keys: f.keys} }

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		d := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(d, 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			return os.Symlink(l, d)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(d, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, p string, v any) {
	b, _ := json.Marshal(v)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every path under the slots root and data dir with sizes:
// "nothing written" means it is unchanged (slots.json aside, which records
// the refusal).
func (f *fixture) snapshot() string {
	var b strings.Builder
	for _, root := range []string{f.l.Root, f.l.DataDir} {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || filepath.Base(p) == slots.StateFile {
				return nil
			}
			b.WriteString(p)
			if fi.Mode()&os.ModeSymlink != 0 {
				l, _ := os.Readlink(p)
				b.WriteString(" -> " + l)
			} else if !fi.IsDir() {
				b.WriteString(" " + fi.ModTime().String())
			}
			b.WriteString("\n")
			return nil
		})
	}
	return b.String()
}

// flashAndInstall is a whole good flash: Flash (daemon), InstallPending
// (qubiq-slot), Boot.
func (f *fixture) flashAndInstall(bundle []byte, opts FlashOptions) Result {
	f.t.Helper()
	res, err := Flash(context.Background(), bytes.NewReader(bundle), opts)
	if err != nil {
		f.t.Fatalf("flash: %v", err)
	}
	ok, _, err := InstallPending(context.Background(), opts)
	if err != nil || !ok {
		f.t.Fatalf("install pending: %v %v", ok, err)
	}
	if _, err := slots.Boot(f.l, slots.BootOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return res
}

func TestFlash_GoodBundleStagesThenInstallsOnTrial(t *testing.T) {
	f := newFixture(t)
	b := f.bundle("1.1.0", runtime.GOARCH, "1.0.0", f.key)
	var prog []int64
	opts := f.opts()
	opts.Progress = func(n int64) { prog = append(prog, n) }
	res, err := Flash(context.Background(), bytes.NewReader(b), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != "1.1.0" || res.Slot != "b" || res.Key != "test-release" || !res.RestartRequired || res.Previous != "1.0.0" || res.Size != int64(len(b)) {
		t.Fatalf("result %+v", res)
	}
	if len(prog) == 0 || prog[len(prog)-1] != int64(len(b)) {
		t.Fatalf("progress %v, want ending at %d", prog, len(b))
	}
	if cur, _ := slots.CurrentSlot(f.l); cur != "a" {
		t.Fatalf("Flash switched current to %s: only qubiq-slot installs", cur)
	}
	if _, err := os.Stat(filepath.Join(f.l.DataDir, StageDir, PendingFile)); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077) // the unit's UMask=, which qubiq-slot inherits
	ok, ires, err := InstallPending(context.Background(), f.opts())
	syscall.Umask(old)
	if err != nil || !ok || ires.Slot != "b" {
		t.Fatalf("install: %v %+v %v", ok, ires, err)
	}
	for _, p := range []string{"", "bin", "python", "python/bin"} {
		if fi, _ := os.Stat(filepath.Join(f.l.SlotDir("b"), p)); fi.Mode().Perm() != 0o755 {
			t.Errorf("slot b/%s has mode %v under umask 0077; the daemon's user could not reach it", p, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(filepath.Join(f.l.SlotDir("b"), slots.ManifestFile)); fi.Mode().Perm() != 0o644 {
		t.Errorf("manifest mode %v", fi.Mode().Perm())
	}
	if err := VerifySlot(f.l, "b"); err != nil {
		t.Fatal(err)
	}
	st, _ := slots.Load(f.l)
	if st.Active != "b" || !st.Trial || st.Previous != "a" || st.Slots["b"].Version != "1.1.0" {
		t.Fatalf("state %+v", st)
	}
	if cur, _ := slots.CurrentSlot(f.l); cur != "b" {
		t.Fatalf("current %s", cur)
	}
	if l, _ := os.Readlink(filepath.Join(f.l.SlotDir("b"), "python/bin/python3")); l != "python3.11" {
		t.Fatalf("link %q", l)
	}
	if fi, _ := os.Stat(filepath.Join(f.l.SlotDir("b"), "bin/qubiqd")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if ok, _, _ := InstallPending(context.Background(), f.opts()); ok {
		t.Fatal("pending installed twice")
	}
	// A flash while on trial is refused: its previous slot is the only good one.
	_, err = Flash(context.Background(), bytes.NewReader(f.bundle("1.2.0", runtime.GOARCH, "", f.key)), f.opts())
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("flash on trial: %v", err)
	}
}

// tamper rewrites the bundle's tar with edit applied to each header/content.
func tamper(t *testing.T, b []byte, edit func(h *tar.Header, body []byte) []byte) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		body, _ := io.ReadAll(tr)
		body = edit(h, body)
		h.Size = int64(len(body))
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.Close()
	zw.Close()
	return out.Bytes()
}

func TestFlash_RefusalsWriteNothing(t *testing.T) {
	f := newFixture(t)
	good := f.bundle("1.1.0", runtime.GOARCH, "", f.key)
	otherPriv, _, _ := Keygen("stranger", nil)
	stranger, _ := ParseSigningKey(otherPriv)
	impostorPriv, _, _ := Keygen("test-release", nil) // a trusted name, another key
	impostor, _ := ParseSigningKey(impostorPriv)

	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	contentChanged := tamper(t, good, func(h *tar.Header, body []byte) []byte {
		if h.Name == "slot/python/bin/python3.11" {
			body[100] ^= 0x01
		}
		return body
	})
	extraFile := tamper(t, good, func(h *tar.Header, body []byte) []byte {
		if h.Name == "slot/bin/qubiqctl" {
			h.Name = "slot/bin/evil"
		}
		return body
	})
	manifestEdited := tamper(t, good, func(h *tar.Header, body []byte) []byte {
		if h.Name == "manifest.json" {
			return bytes.Replace(body, []byte(`"1.1.0"`), []byte(`"1.9.0"`), 1)
		}
		return body
	})
	cases := []struct {
		name   string
		bundle []byte
		force  bool
		max    int64
		want   error
	}{
		{"one byte changed", flipped, false, 0, nil},
		{"file content changed", contentChanged, false, 0, ErrHash},
		{"file not in the manifest", extraFile, false, 0, ErrHash},
		{"manifest edited after signing", manifestEdited, false, 0, ErrSignature},
		{"unknown key", f.bundle("1.1.0", runtime.GOARCH, "", stranger), false, 0, ErrUnknownKey},
		{"trusted name, other key", f.bundle("1.1.0", runtime.GOARCH, "", impostor), false, 0, ErrSignature},
		{"downgrade", f.bundle("0.9.0", runtime.GOARCH, "", f.key), false, 0, ErrDowngrade},
		{"wrong arch", f.bundle("1.1.0", "riscv64", "", f.key), false, 0, ErrArch},
		{"wrong arch, forced", f.bundle("1.1.0", "riscv64", "", f.key), true, 0, ErrArch},
		{"below min_from_version", f.bundle("2.0.0", runtime.GOARCH, "1.5.0", f.key), false, 0, ErrUpgradePath},
		{"too large", good, false, int64(len(good) / 2), ErrTooLarge},
		{"not a bundle", []byte("hello"), false, 0, ErrFormat},
	}
	before := f.snapshot()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := f.opts()
			opts.Force, opts.MaxSize = c.force, c.max
			_, err := Flash(context.Background(), bytes.NewReader(c.bundle), opts)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if after := f.snapshot(); after != before {
				t.Fatalf("something was written:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			st, _ := slots.Load(f.l)
			if st.Active != "a" || st.Trial || st.Last == nil || st.Last.Action != "refuse" || st.Last.OK {
				t.Fatalf("state after refusal: %+v", st.Last)
			}
			// qubiq-slot's own check refuses it as well, also nothing written
			p := filepath.Join(t.TempDir(), "x.qfw")
			os.WriteFile(p, c.bundle, 0o600)
			if _, err := Install(context.Background(), p, opts); err == nil {
				t.Fatal("Install accepted it")
			}
			if after := f.snapshot(); after != before {
				t.Fatalf("Install wrote something:\n%s", after)
			}
		})
	}
}

func TestFlash_ForcedDowngradeAndTheRollbackPath(t *testing.T) {
	f := newFixture(t)
	opts := f.opts()
	opts.Force = true
	f.flashAndInstall(f.bundle("0.9.0", runtime.GOARCH, "", f.key), opts)
	st, _ := slots.Load(f.l)
	if st.Active != "b" || st.Slots["b"].Version != "0.9.0" {
		t.Fatalf("%+v", st)
	}
	// the trial never confirms: after the boot limit it goes back to a
	for i := 0; i < 3; i++ {
		slots.Boot(f.l, slots.BootOptions{})
	}
	if cur, _ := slots.CurrentSlot(f.l); cur != "a" {
		t.Fatalf("current %s after a failed trial", cur)
	}
	if err := VerifySlot(f.l, "b"); err != nil {
		t.Fatal(err) // the failed slot is kept as it was, for inspection
	}
}

func TestFlash_SecondFlashGoesToTheOtherSlot(t *testing.T) {
	f := newFixture(t)
	f.flashAndInstall(f.bundle("1.1.0", runtime.GOARCH, "", f.key), f.opts())
	if _, err := slots.Confirm(f.l, "b"); err != nil {
		t.Fatal(err)
	}
	res := f.flashAndInstall(f.bundle("1.2.0", runtime.GOARCH, "1.1.0", f.key), f.opts())
	if res.Slot != "a" || res.Previous != "1.1.0" {
		t.Fatalf("%+v", res)
	}
	if err := VerifySlot(f.l, "a"); err != nil {
		t.Fatal(err)
	}
	st, _ := slots.Load(f.l)
	if st.Previous != "b" {
		t.Fatalf("previous %q", st.Previous)
	}
}

func TestResign_ReplacesTheSignature(t *testing.T) {
	f := newFixture(t)
	devPriv, devPub, _ := Keygen("dev", nil)
	dev, _ := ParseSigningKey(devPriv)
	devKeys, _ := ParseTrustedKeys(devPub)
	b := f.bundle("1.1.0", runtime.GOARCH, "", dev)
	if _, err := Verify(bytes.NewReader(b), f.keys); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("dev bundle under release keys: %v", err)
	}
	var out bytes.Buffer
	if _, err := Resign(bytes.NewReader(b), &out, f.key); err != nil {
		t.Fatal(err)
	}
	m, err := Verify(bytes.NewReader(out.Bytes()), f.keys)
	if err != nil || m.Version != "1.1.0" {
		t.Fatalf("re-signed: %v", err)
	}
	if _, err := Verify(bytes.NewReader(out.Bytes()), devKeys); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old key still accepted: %v", err)
	}
	// a tampered bundle is not re-signed
	bad := tamper(t, b, func(h *tar.Header, body []byte) []byte {
		if h.Name == "slot/bin/qubiqctl" {
			body[0] ^= 1
		}
		return body
	})
	if _, err := Resign(bytes.NewReader(bad), io.Discard, f.key); !errors.Is(err, ErrHash) {
		t.Fatalf("resign of a tampered bundle: %v", err)
	}
}

func TestKeys_ParseAndRefuseMistakes(t *testing.T) {
	priv, pub, err := Keygen("rel-2025", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTrustedKeys(priv); err == nil || !strings.Contains(err.Error(), "PRIVATE") {
		t.Fatalf("private key as trusted keys: %v", err)
	}
	k, _ := ParseTrustedKeys(append([]byte("# release keys\n\n"), pub...))
	if len(k) != 1 || k["rel-2025"] == nil {
		t.Fatalf("%v", k)
	}
	if _, err := ParseTrustedKeys(append(pub, pub...)); err == nil {
		t.Fatal("duplicate accepted")
	}
	if _, err := ParseTrustedKeys([]byte("x notbase64\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad line: %v", err)
	}
	if _, _, err := Keygen("bad name", nil); err == nil {
		t.Fatal("bad name accepted")
	}
	p := filepath.Join(t.TempDir(), "k")
	os.WriteFile(p, priv, 0o644)
	if _, err := LoadSigningKey(p); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("world-readable key: %v", err)
	}
	if _, err := LoadTrustedKeys(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestManifest_RefusesPathsOutsideTheSlot(t *testing.T) {
	for _, files := range [][]File{
		{{Path: "../etc/passwd", Size: 1, Mode: 0o644, SHA256: strings.Repeat("a", 64)}},
		{{Path: "/etc/passwd", Size: 1, Mode: 0o644, SHA256: strings.Repeat("a", 64)}},
		{{Path: "bin/x", Link: "../../../etc"}},
		{{Path: "bin/x", Link: "/etc"}},
		{{Path: "manifest.json", Size: 1, Mode: 0o644, SHA256: strings.Repeat("a", 64)}},
		{}, // no bin/qubiqd
	} {
		m := Manifest{Format: Format, Product: Product, Version: "1.0.0", Arch: "amd64", Files: files}
		raw, _ := json.Marshal(m)
		if _, err := qfw.ParseManifest(raw); err == nil {
			t.Errorf("accepted %+v", files)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"1.0.0", "1.0.0", 0}, {"1.0.1", "1.0.0", 1}, {"1.10.0", "1.9.0", 1}, {"v1.2", "1.2.0", 0},
		{"1.0.0-rc.1", "1.0.0", -1}, {"1.0.0-rc.2", "1.0.0-rc.10", -1}, {"1.0.0-alpha", "1.0.0-beta", -1}, {"2.0.0+build5", "2.0.0", 0}} {
		if got, err := CompareVersions(c.a, c.b); err != nil || got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
	if _, err := CompareVersions("abc", "1.0"); err == nil {
		t.Error("abc parsed")
	}
}

func TestFlash_ContextCancelled(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Flash(ctx, bytes.NewReader(f.bundle("1.1.0", runtime.GOARCH, "", f.key)), f.opts()); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestKeygenFileAndSignFile(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	priv := filepath.Join(dir, "release.key")
	pub, err := KeygenFile("release-2026", priv)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(priv); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", fi.Mode())
	}
	if _, err := KeygenFile("again", priv); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Fatalf("overwrote a key: %v", err)
	}
	in := filepath.Join(dir, "b.qfw")
	os.WriteFile(in, f.bundle("1.1.0", runtime.GOARCH, "", f.key), 0o644)
	if _, err := SignFile(in, "", priv); err != nil {
		t.Fatal(err)
	}
	keys, _ := ParseTrustedKeys(pub)
	b, _ := os.ReadFile(in)
	if _, err := Verify(bytes.NewReader(b), keys); err != nil {
		t.Fatalf("signed bundle: %v", err)
	}
}
