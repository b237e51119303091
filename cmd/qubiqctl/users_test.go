package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun_Users(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"POST /api/v1/users":               {201, ``},
		"GET /api/v1/users":                {200, `[{"name":"op1","realm":"operator","level":"operate","permissions":[],"disabled":false,"created":"2025-03-01T12:00:00Z","password_changed":"2025-03-01T12:00:00Z"}]`},
		"PUT /api/v1/users/op1/password":   {204, ``},
		"POST /api/v1/users/op1/disable":   {204, ``},
		"POST /api/v1/users/vic/disable":   {200, `{"already":true,"detail":"user \"vic\" was already disabled; nothing changed"}`},
		"POST /api/v1/users/ghost/disable": {404, `{"type":"urn:qubiq:problem:not_found","title":"Not Found","status":404,"detail":"user \"ghost\": not found","kind":"not_found"}`},
	})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("password1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("--url", d.srv.URL, "--api-key", "admin", "users", "add", "--name", "op1", "--realm", "operator",
		"--level", "operate", "--password-file", pw)
	if code != 0 || out != "user op1 added\n" {
		t.Fatalf("add: exit %d out %q err %q", code, out, errOut)
	}
	if r := d.last(t); r.body != `{"name":"op1","realm":"operator","level":"operate","password":"password1"}` || r.auth != "Bearer admin" {
		t.Errorf("add request %+v", r)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "users", "list")
	want := "NAME  REALM     LEVEL    PERMISSIONS  DISABLED  PASSWORD CHANGED\n" +
		"op1   operator  operate  -            no        2025-03-01T12:00:00Z\n"
	if code != 0 || out != want {
		t.Errorf("list: exit %d output:\n%s\nwant:\n%s", code, out, want)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "users", "passwd", "op1", "--password-file", pw); code != 0 {
		t.Errorf("passwd: exit %d %s", code, errOut)
	}
	if r := d.last(t); r.method != "PUT" || r.body != `{"password":"password1"}` {
		t.Errorf("passwd request %+v", r)
	}
	if code, out, _ := runCLI("--url", d.srv.URL, "users", "disable", "op1"); code != 0 || !strings.Contains(out, "disabled") {
		t.Errorf("disable: exit %d %q", code, out)
	}
	// Disabling a disabled user says so (the daemon's detail).
	if code, out, _ := runCLI("--url", d.srv.URL, "users", "disable", "vic"); code != 0 || out != "user \"vic\" was already disabled; nothing changed\n" {
		t.Errorf("disable a disabled user: exit %d %q", code, out)
	}
	if code, out, _ := runCLI("--url", d.srv.URL, "--json", "users", "disable", "vic"); code != 0 || !strings.Contains(out, `"already": true`) {
		t.Errorf("disable a disabled user --json: exit %d %q", code, out)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "users", "disable", "ghost"); code != 1 || !strings.Contains(errOut, `user "ghost": not found`) {
		t.Errorf("disable ghost: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "users", "add", "--name", "x", "--realm", "operator"); code != 2 || !strings.Contains(errOut, "--password-file") {
		t.Errorf("add without a password: exit %d %q", code, errOut)
	}
}
