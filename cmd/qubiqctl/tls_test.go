package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRun_TLSFingerprintPin(t *testing.T) {
	clearEnv(t)
	t.Setenv("QUBIQ_TLS_FINGERPRINT", "")
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"ok","reasons":[],"version":"1","uptime_s":1,"sandbox":{"mode":"none","python":{"status":"ok","version":"","path":""},"linter":"syntax-only"},"devices":{},"escape_hatch":false,"tls":{"mode":"auto","fingerprint_sha256":"AB:CD","not_after":"2036-01-01T00:00:00Z"}}`)
	}))
	defer ts.Close()
	fp := fingerprint(ts.Certificate().Raw)

	code, _, errOut := runCLI("--url", ts.URL, "status")
	if code != 1 || !strings.Contains(errOut, "fingerprint is "+fp) || !strings.Contains(errOut, "--tls-fingerprint "+fp) {
		t.Fatalf("untrusted: exit %d stderr %q", code, errOut)
	}
	code, out, errOut := runCLI("--url", ts.URL, "--tls-fingerprint", strings.ToLower(strings.ReplaceAll(fp, ":", "")), "status")
	if code != 0 || !strings.Contains(out, "tls:       auto, certificate SHA-256 AB:CD") {
		t.Fatalf("pinned: exit %d out %q err %q", code, out, errOut)
	}
	t.Setenv("QUBIQ_TLS_FINGERPRINT", strings.Repeat("00:", 31)+"00")
	code, _, errOut = runCLI("--url", ts.URL, "status")
	if code != 1 || !strings.Contains(errOut, "not the pinned") {
		t.Fatalf("wrong pin: exit %d stderr %q", code, errOut)
	}
}
