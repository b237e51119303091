package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const firmwareHealth = `{"status":"ok","reasons":[],"version":"1.1.0","uptime_s":5,"sandbox":{"mode":"cgroup2"},"devices":{},"escape_hatch":false,
"firmware":{"running_slot":"b","active":"b","current":"b","trial":true,"boot_count":1,"boot_limit":3,
"slots":{"a":{"version":"1.0.0"},"b":{"version":"1.1.0"}},
"last_result":{"time":"2026-01-02T03:04:05Z","action":"install","slot":"b","version":"1.1.0","ok":true,"message":"version 1.1.0 installed in slot b, on trial"}}}`

func TestRun_Status_Slots(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/health": {200, firmwareHealth}})
	code, out, errOut := runCLI("--url", d.srv.URL, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"slot a  1.0.0\n", "slot b  1.1.0 (active, on trial, start 1 of 3)", "install ok: version 1.1.0 installed in slot b"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

func TestRun_Flash(t *testing.T) {
	clearEnv(t)
	var gotQuery, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 1<<20)
		n, _ := r.Body.Read(b)
		gotQuery, gotBody = r.URL.RawQuery, string(b[:n])
		if r.Header.Get("Authorization") != "Bearer k" || r.URL.Path != "/api/v1/firmware" {
			w.WriteHeader(400)
			return
		}
		w.Write([]byte(`{"version":"1.1.0","arch":"amd64","key":"release","slot":"b","size":6,"sha256":"ab","forced":true,"previous_version":"1.2.0","restart_required":true}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "q.qfw")
	os.WriteFile(file, []byte("BUNDLE"), 0o644)
	code, out, errOut := runCLI("--url", srv.URL, "--api-key", "k", "flash", file, "--force")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if gotQuery != "force=true" || gotBody != "BUNDLE" {
		t.Fatalf("the daemon got query %q body %q", gotQuery, gotBody)
	}
	if !strings.Contains(out, "bundle 1.1.0 (amd64, signed by release, 6 bytes) verified (forced); staged for slot b, replacing 1.2.0") {
		t.Fatalf("out %q", out)
	}
	if !strings.Contains(errOut, "6 of 6 bytes sent (100%)") {
		t.Fatalf("no progress on stderr: %q", errOut)
	}
}

func TestRun_Flash_RefusedExits1WithTheRule(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/firmware": {422, `{"type":"urn:qubiq:problem:unknown_key","title":"Unprocessable Entity","status":422,"detail":"signed by a key this appliance does not trust: stranger","kind":"unknown_key"}`}})
	file := filepath.Join(t.TempDir(), "q.qfw")
	os.WriteFile(file, []byte("BUNDLE"), 0o644)
	code, _, errOut := runCLI("--url", d.srv.URL, "flash", file)
	if code != 1 || !strings.Contains(errOut, "signed by a key this appliance does not trust") || !strings.Contains(errOut, "unknown_key") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestRun_BackupRestoreLogLevel(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"POST /api/v1/backup":   {200, "QBK-BYTES"},
		"POST /api/v1/restore":  {200, `{"appliance_id":"line1","version":"1.1.0","created":"2026-01-02T03:04:05Z","entries":4,"restart_required":true}`},
		"GET /api/v1/log-level": {200, `{"level":"INFO"}`},
		"PUT /api/v1/log-level": {200, `{"level":"DEBUG"}`},
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "b.qbk")
	if code, out, errOut := runCLI("--url", d.srv.URL, "backup", "-o", file); code != 0 || !strings.Contains(out, "backup written to "+file+" (9 bytes); it holds the secrets key") {
		t.Fatalf("backup: %d %q %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(file); string(b) != "QBK-BYTES" {
		t.Fatalf("backup file %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Fatalf("left %v", m)
	}
	if code, _, _ := runCLI("--url", d.srv.URL, "backup"); code != 2 {
		t.Fatalf("backup without -o: exit %d", code)
	}
	code, out, errOut := runCLI("--url", d.srv.URL, "restore", file)
	if code != 0 || !strings.Contains(out, "backup of line1 (version 1.1.0") || !strings.Contains(out, "not carried") {
		t.Fatalf("restore: %d %q %q", code, out, errOut)
	}
	if r := d.find(t, "POST", "/api/v1/restore"); r.body != "QBK-BYTES" {
		t.Fatalf("restore sent %q", r.body)
	}
	if code, out, _ := runCLI("--url", d.srv.URL, "log-level"); code != 0 || out != "log level: info\n" {
		t.Fatalf("log-level: %d %q", code, out)
	}
	if code, out, _ := runCLI("--url", d.srv.URL, "log-level", "debug"); code != 0 || out != "log level: debug\n" || d.last(t).body != `{"level":"debug"}` {
		t.Fatalf("log-level debug: %d %q %q", code, out, d.last(t).body)
	}
}

func TestRun_Status_JSONHasTheSlots(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/health": {200, firmwareHealth}})
	code, out, errOut := runCLI("--url", d.srv.URL, "--json", "status")
	if code != 0 || !strings.Contains(out, `"running_slot": "b"`) || !strings.Contains(out, `"boot_limit": 3`) {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}

func TestRun_BackupRestore_Passphrase(t *testing.T) {
	clearEnv(t)
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+" "+r.Header.Get("Qubiq-Backup-Passphrase"))
		if r.URL.Path == "/api/v1/backup" {
			w.Write([]byte("QBK"))
			return
		}
		w.Write([]byte(`{"appliance_id":"a","version":"1","created":"2026-01-02T03:04:05Z","entries":1,"restart_required":true}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("correct horse\n"), 0o600)
	file := filepath.Join(dir, "b.qbk")
	code, out, errOut := runCLI("--url", srv.URL, "backup", "-o", file, "--passphrase-file", pass)
	if code != 0 {
		t.Fatalf("backup: %d %s", code, errOut)
	}
	// Sealed, the secrets key is not in the file as is: the message says
	// the passphrase is needed, not that the file holds the key.
	if !strings.Contains(out, "sealed with the passphrase") || strings.Contains(out, "it holds the secrets key") {
		t.Fatalf("backup with a passphrase says %q", out)
	}
	if code, _, errOut := runCLI("--url", srv.URL, "restore", file, "--passphrase-file", pass); code != 0 {
		t.Fatalf("restore: %d %s", code, errOut)
	}
	if strings.Join(got, "|") != "/api/v1/backup correct horse|/api/v1/restore correct horse" {
		t.Fatalf("the daemon got %q", got)
	}
}
