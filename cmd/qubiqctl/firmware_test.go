package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qubiq.dev/edge/firmware/qfw"
)

// TestFirmwareKeygenSign: a release manager's key from `firmware keygen`
// signs a bundle built with another key (`firmware sign`); an appliance
// trusting only the new key's line accepts it, and one byte changed in a
// file is refused by sign itself (every hash is checked first).
func TestFirmwareKeygenSign(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "release.key")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"firmware", "keygen", "release-2027", "--key", key}, &out, &errOut); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut.String())
	}
	line, err := os.ReadFile(key + ".pub")
	if err != nil || !strings.Contains(out.String(), strings.TrimSpace(string(line))) {
		t.Fatalf("keygen printed %q, .pub holds %q (%v)", out.String(), line, err)
	}
	if code := run(context.Background(), []string{"firmware", "keygen", "again", "--key", key}, &out, &errOut); code == 0 {
		t.Error("keygen overwrote an existing signing key")
	}

	// A bundle built and signed with a development key.
	slot := filepath.Join(dir, "slot")
	os.MkdirAll(filepath.Join(slot, "bin"), 0o755)
	os.WriteFile(filepath.Join(slot, "bin", "qubiqd"), []byte("#!/bin/sh\necho qubiqd\n"), 0o755)
	devPriv, _, err := qfw.Keygen("dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := qfw.ParseSigningKey(devPriv)
	if err != nil {
		t.Fatal(err)
	}
	var bundle bytes.Buffer
	if _, err := qfw.Build(&bundle, qfw.BuildOptions{SlotDir: slot, Version: "1.2.0", Arch: "amd64", Key: dev}); err != nil {
		t.Fatal(err)
	}
	qfwPath := filepath.Join(dir, qfw.BundleName("1.2.0", "amd64"))
	os.WriteFile(qfwPath, bundle.Bytes(), 0o644)

	out.Reset()
	if code := run(context.Background(), []string{"firmware", "sign", qfwPath, "--key", key}, &out, &errOut); code != 0 {
		t.Fatalf("sign: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "version 1.2.0 (amd64)") {
		t.Errorf("sign printed %q", out.String())
	}
	trusted, err := qfw.ParseTrustedKeys(line)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(qfwPath)
	defer f.Close()
	if m, err := qfw.Verify(f, trusted); err != nil || m.Version != "1.2.0" {
		t.Fatalf("the re-signed bundle does not verify with the new key: %v", err)
	}

	damaged := bytes.Clone(bundle.Bytes())
	damaged[len(damaged)/2] ^= 1
	bad := filepath.Join(dir, "bad.qfw")
	os.WriteFile(bad, damaged, 0o644)
	errOut.Reset()
	if code := run(context.Background(), []string{"firmware", "sign", bad, "--key", key}, &out, &errOut); code == 0 {
		t.Error("a damaged bundle was signed")
	}
	if b, _ := os.ReadFile(bad); !bytes.Equal(b, damaged) {
		t.Error("a refused sign changed the bundle")
	}
}
