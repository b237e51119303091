package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/client"
	"qubiq.dev/edge/gateway"
)

const certThumb = "00112233445566778899aabbccddeeff00112233"

// storeCerts is an api.DeviceCerts with one device "ua 1" (a space, to
// check the path escaping) holding one rejected certificate.
type storeCerts struct{ status string }

func (s *storeCerts) ListCerts(_ context.Context, device string) ([]gateway.DeviceCert, error) {
	if device != "ua 1" {
		return nil, fmt.Errorf("device %q: %w", device, api.ErrNotFound)
	}
	return []gateway.DeviceCert{{Device: device, Thumbprint: certThumb, Status: s.status}}, nil
}

func (s *storeCerts) move(device, tp, to string) (gateway.DeviceCert, error) {
	if device != "ua 1" || tp != certThumb {
		return gateway.DeviceCert{}, fmt.Errorf("certificate %s: %w", tp, api.ErrNotFound)
	}
	s.status = to
	return gateway.DeviceCert{Device: device, Thumbprint: tp, Status: to}, nil
}

func (s *storeCerts) TrustCert(_ context.Context, _ auth.Grant, device, tp string) (gateway.DeviceCert, error) {
	return s.move(device, tp, gateway.CertTrusted)
}

func (s *storeCerts) RejectCert(_ context.Context, _ auth.Grant, device, tp string) (gateway.DeviceCert, error) {
	return s.move(device, tp, gateway.CertRejected)
}

type designerAuth struct{}

func (designerAuth) Authenticate(context.Context, string) (auth.Grant, error) {
	return auth.Grant{Principal: "d", Permissions: []auth.Permission{auth.Designer}}, nil
}

func TestClient_DeviceCerts_ListTrustReject(t *testing.T) {
	s, err := api.New(api.Config{}, api.Deps{Auth: designerAuth{}, Certs: &storeCerts{status: "rejected"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list, err := c.ListDeviceCerts(ctx, "ua 1")
	if err != nil || len(list) != 1 || list[0].Status != "rejected" {
		t.Fatalf("ListDeviceCerts = %+v, %v; want one rejected", list, err)
	}
	got, err := c.TrustDeviceCert(ctx, "ua 1", certThumb)
	if err != nil || got.Status != "trusted" {
		t.Fatalf("TrustDeviceCert = %+v, %v; want trusted", got, err)
	}
	got, err = c.RejectDeviceCert(ctx, "ua 1", certThumb)
	if err != nil || got.Status != "rejected" {
		t.Fatalf("RejectDeviceCert = %+v, %v; want rejected", got, err)
	}
	_, err = c.TrustDeviceCert(ctx, "ua 1", "ffffffffffffffffffffffffffffffffffffffff")
	if pe, ok := err.(*client.ProblemError); !ok || pe.Status != http.StatusNotFound {
		t.Errorf("trust of an unknown thumbprint: %v, want a 404 problem", err)
	}
	if _, err := c.ListDeviceCerts(ctx, "nope"); !client.IsKind(err, "not_found") {
		t.Errorf("list of an unknown device: %v, want not_found", err)
	}
}
