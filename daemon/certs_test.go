package daemon

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

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device/opcua"
	"qubiq.dev/edge/store"
)

// newStoreSystem builds a System with a store, an audit log and the
// project src (not built: no engine), in a temporary directory.
func newStoreSystem(t *testing.T, dir, src string) *System {
	t.Helper()
	p, err := config.ParseProject([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p.File = filepath.Join(dir, "project.yaml")
	s := &System{Config: &config.Daemon{DataDir: filepath.Join(dir, "data")}, Log: quiet, started: time.Now()}
	s.project.Store(p)
	s.DB, err = store.Open(filepath.Join(s.Config.DataDir, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Audit = store.NewAuditLog(s.DB, store.AuditOptions{MaxDelay: 2 * time.Millisecond}, quiet)
	t.Cleanup(func() {
		if err := s.Audit.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := s.DB.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
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

func TestCertsAPI_TrustReject_MovesAndAudits(t *testing.T) {
	dir := t.TempDir()
	s := newStoreSystem(t, dir, certsProject(filepath.Join(dir, "pki2")))
	pki := filepath.Join(s.Config.DataDir, "pki")
	tp := serverCert(t, filepath.Join(pki, opcua.RejectedDir), "ua-server")
	c := certsAPI{s}
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

func TestCertsAPI_Errors(t *testing.T) {
	dir := t.TempDir()
	s := newStoreSystem(t, dir, certsProject(filepath.Join(dir, "pki2")))
	c := certsAPI{s}
	g := auth.Full("eng", auth.RealmPlatform, "rest")
	ctx := context.Background()
	missing := "ffffffffffffffffffffffffffffffffffffffff"
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"list unknown device", func() error { _, err := c.ListCerts(ctx, "nope"); return err }, api.ErrNotFound},
		{"list non-opcua device", func() error { _, err := c.ListCerts(ctx, "sim"); return err }, api.ErrInvalid},
		{"trust unknown thumbprint", func() error { _, err := c.TrustCert(ctx, g, "ua1", missing); return err }, api.ErrNotFound},
		{"reject unknown device", func() error { _, err := c.RejectCert(ctx, g, "nope", missing); return err }, api.ErrNotFound},
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

func TestCertsAPI_ListCerts_DevicePKIDir(t *testing.T) {
	dir := t.TempDir()
	pki2 := filepath.Join(dir, "pki2")
	s := newStoreSystem(t, dir, certsProject(pki2))
	tp := serverCert(t, filepath.Join(pki2, opcua.TrustedDir), "other")
	list, err := certsAPI{s}.ListCerts(context.Background(), "ua2")
	if err != nil || len(list) != 1 || list[0].Thumbprint != tp || list[0].Status != "trusted" {
		t.Fatalf("ListCerts(ua2) = %+v, %v; want the trusted certificate of its own pki_dir", list, err)
	}
	if list, err := (certsAPI{s}).ListCerts(context.Background(), "ua1"); err != nil || len(list) != 0 {
		t.Errorf("ListCerts(ua1) = %+v, %v; want its own (empty) store", list, err)
	}
}
