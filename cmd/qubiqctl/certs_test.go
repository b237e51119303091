package main

import (
	"strings"
	"testing"
)

const certsBody = `[{"device":"ua1","thumbprint":"0123456789abcdef0123456789abcdef01234567","status":"rejected","subject":"CN=server",
"issuer":"CN=server","not_before":"2025-01-01T00:00:00Z","not_after":"2026-01-01T00:00:00Z","expired":false,"is_ca":false}]`

const trustedBody = `{"device":"ua1","thumbprint":"0123456789abcdef0123456789abcdef01234567","status":"trusted","subject":"CN=server",
"issuer":"CN=server","not_before":"2025-01-01T00:00:00Z","not_after":"2026-01-01T00:00:00Z","expired":false,"is_ca":false}`

func TestRun_DevicesCerts_List(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/devices/ua1/certs": {200, certsBody}})
	code, out, errOut := runCLI("--url", d.srv.URL, "--api-key", "k", "devices", "certs", "list", "ua1")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	want := "" +
		"THUMBPRINT                                STATUS    SUBJECT    NOT_BEFORE            NOT_AFTER             EXPIRED\n" +
		"0123456789abcdef0123456789abcdef01234567  rejected  CN=server  2025-01-01T00:00:00Z  2026-01-01T00:00:00Z  no\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestRun_DevicesCerts_TrustAndReject(t *testing.T) {
	const tp = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		action, body, want string
	}{
		{"trust", trustedBody, "trusted " + tp + " (CN=server) for device ua1\n"},
		{"reject", strings.Replace(trustedBody, `"trusted"`, `"rejected"`, 1), "rejected " + tp + " (CN=server) for device ua1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			clearEnv(t)
			route := "POST /api/v1/devices/ua1/certs/" + tp + "/" + tt.action
			d := newFakeDaemon(t, map[string]answer{route: {200, tt.body}})
			code, out, errOut := runCLI("--url", d.srv.URL, "--api-key", "k", "devices", "certs", tt.action, "ua1", tp)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
			if r := d.last(t); r.method+" "+r.path != route || r.auth != "Bearer k" {
				t.Errorf("request %s %s (auth %q), want %s", r.method, r.path, r.auth, route)
			}
		})
	}
}

func TestRun_DevicesCerts_Errors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no action", []string{"devices", "certs"}, exitUsage, "devices certs: missing subcommand\nusage: qubiqctl devices certs list|trust|reject ..."},
		{"unknown action", []string{"devices", "certs", "delete", "ua1"}, exitUsage, `unknown subcommand "devices certs delete" (devices certs has: list, trust, reject)`},
		{"trust without thumbprint", []string{"devices", "certs", "trust", "ua1"}, exitUsage,
			"want DEVICE THUMBPRINT, got 1 argument(s)\nusage: qubiqctl devices certs trust DEVICE THUMBPRINT\n"},
		{"unknown thumbprint", []string{"devices", "certs", "trust", "ua1", "ffffffffffffffffffffffffffffffffffffffff"}, exitError, "(HTTP 404, not_found)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			d := newFakeDaemon(t, nil)
			code, _, errOut := runCLI(append([]string{"--url", d.srv.URL, "--api-key", "k"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.err) {
				t.Errorf("exit %d stderr %q; want exit %d and %q", code, errOut, tt.code, tt.err)
			}
		})
	}
}
