//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// OPC UA through qubiqd (issue 6): the node-opcua test server of the
// driver (internal/peers.StartOPCUA), a daemon with an opcua device, and
// only the external contract (REST, qubiqctl).

const vendorNS = "urn:vendor:plc"

// uaProject is one opcua device at url with security (a YAML fragment of
// extra device keys, or "") and two tags: the server's Counter (ns= form,
// index counterNS) and the writable Temp (nsu= form). Durations are scaled
// down for tests.
func uaProject(url string, counterNS int, security string) string {
	return fmt.Sprintf(`devices:
  - {name: ua1, driver: opcua, url: %q, timeout: 2s, publishing_interval: 200ms, session_timeout: 20s,
     reconnect_min: 100ms, reconnect_max: 1s, application_uri: "urn:qubiq:it:client"%s}
tags:
  - {path: UA/Counter, device: ua1, address: "ns=%d;s=Counter", type: uint32, scan: 200ms}
  - {path: UA/Temp, device: ua1, address: "nsu=%s;s=Temp", type: float64, scan: 200ms}
`, url, security, counterNS, vendorNS)
}

// waitChanging waits until path is Good with two different values in a
// row, and returns the last.
func waitChanging(t *testing.T, d *daemon, token, path string, within time.Duration, what string) tagValue {
	t.Helper()
	var first, last tagValue
	waitFor(t, within, what, func() (bool, string) {
		v := d.read(token, path)[path]
		if v.Quality != "Good" {
			first = tagValue{}
			return false, fmt.Sprintf("%+v", v)
		}
		if first.Quality == "" {
			first = v
			return false, fmt.Sprintf("first %+v", v)
		}
		last = v
		return v.Value != first.Value, fmt.Sprintf("%s stays %s", path, v.Value)
	})
	return last
}

// tagAddress returns path's address as GET /api/v1/tags shows it.
func tagAddress(t *testing.T, d *daemon, token, path string) string {
	t.Helper()
	var tags []struct {
		Path    string `json:"path"`
		Address string `json:"address"`
	}
	if st, body := d.call("GET", "/api/v1/tags", token, nil, &tags); st != 200 {
		t.Fatalf("GET /tags: %d %s", st, body)
	}
	for _, tg := range tags {
		if tg.Path == path {
			return tg.Address
		}
	}
	t.Fatalf("GET /tags lacks %s", path)
	return ""
}

// TestOPCUA_SubscribeWriteAndRecover: security None. A subscribed value
// changes; a write reaches the server; the ns= address is stored in the
// nsu= form; the server restarted with its namespaces re-ordered flows
// again without restarting qubiqd, and after a restart of qubiqd too (the
// stored nsu= form, not the project's stale ns= index, finds the node).
func TestOPCUA_SubscribeWriteAndRecover(t *testing.T) {
	srv := peers.StartOPCUA(t)
	idx := srv.NamespaceIndex(vendorNS)
	d := newDaemon(t, uaProject(srv.URL(), idx, ""))
	d.start()
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	writer := d.apiKey("writer", []string{"tag:read", "tag:write"}, "operate")

	waitChanging(t, d, reader, "UA/Counter", 15*time.Second, "the subscribed Counter changing")

	// A write reaches the server (read back on the server side), and the
	// subscription brings it back.
	out := d.qubiqctl(writer, "tags", "write", "UA/Temp=33.25")
	if !strings.Contains(out, "Good") {
		t.Fatalf("tags write: %s", out)
	}
	if got := srv.Cmd("get Temp")["value"]; fmt.Sprint(got) != "33.25" {
		t.Fatalf("server's Temp = %v after the write, want 33.25", got)
	}
	waitFor(t, 5*time.Second, "the written value back through the subscription", func() (bool, string) {
		v := d.read(reader, "UA/Temp")["UA/Temp"]
		return v.Quality == "Good" && v.Value.String() == "33.25", fmt.Sprintf("%+v", v)
	})
	// A value set on the server arrives.
	srv.Cmd("set Temp 18.5")
	waitFor(t, 5*time.Second, "a server-side change", func() (bool, string) {
		v := d.read(reader, "UA/Temp")["UA/Temp"]
		return v.Value.String() == "18.5", fmt.Sprintf("%+v", v)
	})

	// ns= is converted at the first connection and shown, then stored.
	wantAddr := "nsu=" + vendorNS + ";s=Counter"
	waitFor(t, 5*time.Second, "the Counter's address in the nsu= form", func() (bool, string) {
		a := tagAddress(t, d, reader, "UA/Counter")
		return a == wantAddr, a
	})

	// The server goes away and comes back with its namespaces re-ordered.
	srv.Kill()
	waitFor(t, 10*time.Second, "Counter Bad while the server is away", func() (bool, string) {
		v := d.read(reader, "UA/Counter")["UA/Counter"]
		return strings.HasPrefix(v.Quality, "Bad_"), fmt.Sprintf("%+v", v)
	})
	srv.Start("--extra-ns-first")
	if srv.NamespaceIndex(vendorNS) == idx {
		t.Fatalf("the server did not re-order its namespaces: %v", srv.Namespaces())
	}
	waitChanging(t, d, reader, "UA/Counter", 20*time.Second, "Counter flowing again after the server's restart, without restarting qubiqd")

	// qubiqd restarted: the project still says ns=<old index>, which is
	// now another namespace; the stored nsu= form keeps the tag on its node.
	d.stop()
	d.start()
	waitChanging(t, d, reader, "UA/Counter", 20*time.Second, "Counter flowing after qubiqd's restart, through the stored nsu= address")
	if a := tagAddress(t, d, reader, "UA/Counter"); a != wantAddr {
		t.Errorf("after the restart GET /tags shows %q, want %q", a, wantAddr)
	}
}

// TestOPCUA_UntrustedCertificateThenTrusted: Basic256Sha256 with
// SignAndEncrypt. The server's certificate is unknown: the tags are
// Bad_CertificateUntrusted ("certificate not trusted"), the certificate
// waits in pki/rejected; `qubiqctl devices certs trust` (audited) lets the
// values flow without a restart.
func TestOPCUA_UntrustedCertificateThenTrusted(t *testing.T) {
	srv := peers.StartOPCUA(t)
	d := newDaemon(t, uaProject(srv.URL(), srv.NamespaceIndex(vendorNS),
		", security_policy: Basic256Sha256, security_mode: SignAndEncrypt"))
	d.start()
	reader := d.apiKey("reader", []string{"tag:read"}, "view")
	designer := d.apiKey("designer", []string{"tag:read"}, "view", "designer")

	waitFor(t, 15*time.Second, "Bad_CertificateUntrusted", func() (bool, string) {
		v := d.read(reader, "UA/Counter")["UA/Counter"]
		return v.Quality == "Bad_CertificateUntrusted" && strings.Contains(v.Reason, "certificate not trusted"), fmt.Sprintf("%+v", v)
	})

	// A reader may not see or change the store.
	if st, body := d.call("GET", "/api/v1/devices/ua1/certs", reader, nil, nil); st != 403 || !strings.Contains(string(body), "designer") {
		t.Fatalf("certs list with tag:read only: %d %s, want 403 naming designer", st, body)
	}

	var certs []struct {
		Thumbprint string `json:"thumbprint"`
		Status     string `json:"status"`
		Subject    string `json:"subject"`
		NotAfter   string `json:"not_after"`
	}
	if err := json.Unmarshal([]byte(d.qubiqctl(designer, "--json", "devices", "certs", "list", "ua1")), &certs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range certs {
		if c.Thumbprint == srv.Thumbprint() {
			found = c.Status == "rejected" && c.NotAfter != ""
		}
	}
	if !found {
		t.Fatalf("devices certs list: %+v; want the server's %s rejected, with its validity", certs, srv.Thumbprint())
	}
	table := d.qubiqctl(designer, "devices", "certs", "list", "ua1")
	if !strings.Contains(table, srv.Thumbprint()) || !strings.Contains(table, "rejected") {
		t.Fatalf("devices certs list table:\n%s", table)
	}

	if out := d.qubiqctl(designer, "devices", "certs", "trust", "ua1", srv.Thumbprint()); !strings.Contains(out, "trusted "+srv.Thumbprint()) {
		t.Fatalf("devices certs trust: %s", out)
	}
	waitChanging(t, d, reader, "UA/Counter", 15*time.Second, "values flowing after trust, without a restart")

	// The trust is audited with who made it.
	var recs []struct {
		Action    string          `json:"action"`
		Target    string          `json:"target"`
		Principal string          `json:"principal"`
		After     json.RawMessage `json:"after"`
	}
	if st, body := d.call("GET", "/api/v1/audit?limit=1000", d.token, nil, &recs); st != 200 {
		t.Fatalf("GET /audit: %d %s", st, body)
	}
	audited := false
	for _, r := range recs {
		if r.Action == "device.cert.trust" && r.Target == "ua1" && strings.Contains(string(r.After), srv.Thumbprint()) {
			audited = r.Principal != ""
		}
	}
	if !audited {
		t.Errorf("no audit record of the trust in %+v", recs)
	}
}
