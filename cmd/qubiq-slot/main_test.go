package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun_UsageActivateStatusDropIn(t *testing.T) {
	d := t.TempDir()
	root, data := filepath.Join(d, "lib"), filepath.Join(d, "data")
	os.MkdirAll(filepath.Join(root, "slots/a/bin"), 0o755)
	os.WriteFile(filepath.Join(root, "slots/a/bin/qubiqd"), []byte("#!/bin/sh\n"), 0o755)
	var out, errb bytes.Buffer
	call := func(args ...string) int {
		out.Reset()
		errb.Reset()
		return run(context.Background(), args, &out, &errb)
	}
	if c := call(); c != 2 {
		t.Fatalf("no command: %d", c)
	}
	if c := call("frobnicate"); c != 2 || !strings.Contains(errb.String(), "usage") {
		t.Fatalf("unknown command: %d %s", c, errb.String())
	}
	if c := call("activate", "c", "--root", root); c != 2 {
		t.Fatalf("bad slot: %d", c)
	}
	if c := call("activate", "--root", root, "--data-dir", data, "--reason", "package installed", "a"); c != 0 {
		t.Fatalf("activate: %d %s", c, errb.String())
	}
	if c := call("status", "--root", root, "--data-dir", data); c != 0 || !strings.Contains(out.String(), "slot a") ||
		!strings.Contains(out.String(), "active, current") || !strings.Contains(out.String(), "package installed") {
		t.Fatalf("status: %d\n%s%s", c, out.String(), errb.String())
	}
	// boot without trusted keys and nothing pending still starts the slot
	if c := call("boot", "--root", root, "--data-dir", data, "--trusted-keys", filepath.Join(d, "none")); c != 0 ||
		!strings.Contains(out.String(), "starting slot a (confirmed)") {
		t.Fatalf("boot: %d\n%s%s", c, out.String(), errb.String())
	}
	if c := call("serial-dropin", "--out", "-", "/dev/ttyUSB0"); c != 0 || !strings.Contains(out.String(), "DeviceAllow=/dev/ttyUSB0 rw") {
		t.Fatalf("serial-dropin: %d %s", c, out.String())
	}
	p := filepath.Join(d, "etc/qubiqd.service.d/50-serial.conf")
	if c := call("serial-dropin", "--out", p, "char-ttyUSB"); c != 0 {
		t.Fatalf("serial-dropin to file: %d %s", c, errb.String())
	}
	if b, _ := os.ReadFile(p); !strings.Contains(string(b), "DeviceAllow=char-ttyUSB rw") {
		t.Fatalf("drop-in file: %s", b)
	}
	if c := call("serial-dropin", "--out", "-", "ttyUSB0"); c != 1 {
		t.Fatalf("bad device: %d", c)
	}
}
