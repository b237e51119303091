package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device/opcua"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/opcuastore"
)

// newCertsService builds a service over the project src (kept in the
// store), with the OPC UA certificate stores of opcuastore, in dir.
func newCertsService(t *testing.T, dir, src string) *Service {
	t.Helper()
	opts := withStoredProject(t, testOptions(t, dir), src)
	opts.Certs = opcuastore.Certs{DataDir: opts.DataDir}
	opts.DeviceDefaults = opcuastore.Defaults(opts.DataDir)
	return newService(t, opts)
}

// serverCert writes a self-signed certificate into dir/<thumbprint>.der
// and returns its thumbprint.
func serverCert(t *testing.T, dir, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	tp := opcua.Thumbprint(der)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tp+".der"), der, 0o644); err != nil {
		t.Fatal(err)
	}
	return tp
}

// certsProject has two OPC UA devices, ua2 with its own pki_dir, and a
// simulator.
func certsProject(pki2 string) string {
	return `
devices:
  - {name: ua1, driver: opcua, url: "opc.tcp://127.0.0.1:4840"}
  - {name: ua2, driver: opcua, url: "opc.tcp://127.0.0.1:4841", pki_dir: "` + pki2 + `"}
  - {name: sim, driver: sim}
`
}

func TestService_Certs_TrustReject_MovesAndAudits(t *testing.T) {
	dir := t.TempDir()
	s := newCertsService(t, dir, certsProject(filepath.Join(dir, "pki2")))
	pki := filepath.Join(s.opts.DataDir, "pki")
	tp := serverCert(t, filepath.Join(pki, opcua.RejectedDir), "ua-server")
	c := s
	g := auth.Grant{Principal: "eng", Realm: auth.RealmPlatform, Origin: "rest", Permissions: []auth.Permission{auth.Designer}}
	ctx := context.Background()

	list, err := c.ListCerts(ctx, "ua1")
	if err != nil || len(list) != 1 || list[0].Thumbprint != tp || list[0].Status != "rejected" ||
		list[0].Subject != "CN=ua-server" || list[0].Expired || list[0].NotAfter.IsZero() {
		t.Fatalf("ListCerts = %+v, %v; want the rejected CN=ua-server, valid", list, err)
	}
	got, err := c.TrustCert(ctx, g, "ua1", tp)
	if err != nil || got.Status != "trusted" {
		t.Fatalf("TrustCert = %+v, %v; want trusted", got, err)
	}
	if _, err := os.Stat(filepath.Join(pki, opcua.TrustedDir, tp+".der")); err != nil {
		t.Errorf("not in trusted/ after trust: %v", err)
	}
	if got, err = c.RejectCert(ctx, g, "ua1", tp); err != nil || got.Status != "rejected" {
		t.Fatalf("RejectCert = %+v, %v; want rejected", got, err)
	}
	var actions []string
	for _, r := range auditRecords(t, s) {
		if r.Target != "ua1" {
			continue
		}
		var after map[string]any
		if err := json.Unmarshal(r.After, &after); err != nil {
			t.Fatal(err)
		}
		if r.Principal != "eng" || after["thumbprint"] != tp || r.Result != "ok" {
			t.Errorf("audit record %+v (after %v): want principal eng, thumbprint %s", r, after, tp)
		}
		actions = append(actions, r.Action+":"+after["from"].(string)+"->"+after["to"].(string))
	}
	want := []string{"device.cert.trust:rejected->trusted", "device.cert.reject:trusted->rejected"}
	if len(actions) != 2 || actions[0] != want[0] || actions[1] != want[1] {
		t.Errorf("audited %v, want %v", actions, want)
	}
}

func TestService_Certs_Errors(t *testing.T) {
	dir := t.TempDir()
	s := newCertsService(t, dir, certsProject(filepath.Join(dir, "pki2")))
	c := s
	g := auth.Full("eng", auth.RealmPlatform, "rest")
	ctx := context.Background()
	missing := "ffffffffffffffffffffffffffffffffffffffff"
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"list unknown device", func() error { _, err := c.ListCerts(ctx, "nope"); return err }, gateway.ErrNotFound},
		{"list non-opcua device", func() error { _, err := c.ListCerts(ctx, "sim"); return err }, gateway.ErrInvalid},
		{"trust unknown thumbprint", func() error { _, err := c.TrustCert(ctx, g, "ua1", missing); return err }, gateway.ErrNotFound},
		{"reject unknown device", func() error { _, err := c.RejectCert(ctx, g, "nope", missing); return err }, gateway.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if recs := auditRecords(t, s); len(recs) != 0 {
		t.Errorf("failed calls were audited: %+v", recs)
	}
}

func TestService_Certs_ListCerts_DevicePKIDir(t *testing.T) {
	dir := t.TempDir()
	pki2 := filepath.Join(dir, "pki2")
	s := newCertsService(t, dir, certsProject(pki2))
	tp := serverCert(t, filepath.Join(pki2, opcua.TrustedDir), "other")
	list, err := s.ListCerts(context.Background(), "ua2")
	if err != nil || len(list) != 1 || list[0].Thumbprint != tp || list[0].Status != "trusted" {
		t.Fatalf("ListCerts(ua2) = %+v, %v; want the trusted certificate of its own pki_dir", list, err)
	}
	if list, err := s.ListCerts(context.Background(), "ua1"); err != nil || len(list) != 0 {
		t.Errorf("ListCerts(ua1) = %+v, %v; want its own (empty) store", list, err)
	}
}
