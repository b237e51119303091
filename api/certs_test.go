package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

const (
	thumbA = "0123456789abcdef0123456789abcdef01234567"
	thumbB = "89abcdef0123456789abcdef0123456789abcdef"
)

// fakeCerts is one device "ua1" with a rejected certificate thumbA; it
// records the moves and who made them.
type fakeCerts struct {
	mu     sync.Mutex
	status map[string]string // thumbprint → status
	moves  []string          // "trust ua1 <thumb> by <principal>"
}

func newFakeCerts() *fakeCerts {
	return &fakeCerts{status: map[string]string{thumbA: gateway.CertRejected}}
}

func (f *fakeCerts) cert(tp string) gateway.DeviceCert {
	return gateway.DeviceCert{Device: "ua1", Thumbprint: tp, Status: f.status[tp], Subject: "CN=server",
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour)}
}

func (f *fakeCerts) ListCerts(_ context.Context, device string) ([]gateway.DeviceCert, error) {
	if device != "ua1" {
		return nil, fmt.Errorf("device %q: %w", device, ErrNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return []gateway.DeviceCert{f.cert(thumbA)}, nil
}

func (f *fakeCerts) move(g auth.Grant, verb, device, tp, to string) (gateway.DeviceCert, error) {
	if device != "ua1" {
		return gateway.DeviceCert{}, fmt.Errorf("device %q: %w", device, ErrNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.status[tp]; !ok {
		return gateway.DeviceCert{}, fmt.Errorf("certificate %s: %w", tp, ErrNotFound)
	}
	f.status[tp] = to
	f.moves = append(f.moves, verb+" "+device+" "+tp+" by "+g.Principal)
	return f.cert(tp), nil
}

func (f *fakeCerts) TrustCert(_ context.Context, g auth.Grant, device, tp string) (gateway.DeviceCert, error) {
	return f.move(g, "trust", device, tp, gateway.CertTrusted)
}

func (f *fakeCerts) RejectCert(_ context.Context, g auth.Grant, device, tp string) (gateway.DeviceCert, error) {
	return f.move(g, "reject", device, tp, gateway.CertRejected)
}

func certServer(t *testing.T, dc DeviceCerts) *Server {
	t.Helper()
	deps := Deps{Auth: sandboxAuth{}}
	if dc != nil {
		deps.Certs = dc
	}
	s, err := New(Config{Now: func() time.Time { return testNow }}, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func certDo(t *testing.T, s *Server, method, path, token string) *httptest.ResponseRecorder {
	t.Helper()
	return sbDo(t, s, httptest.NewRequest(method, path, nil), token)
}

func TestServer_ListCerts_DesignerSeesTheStore(t *testing.T) {
	s := certServer(t, newFakeCerts())
	rec := certDo(t, s, "GET", "/api/v1/devices/ua1/certs", tokDesigner)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got []apitypes.DeviceCert
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Thumbprint != thumbA || got[0].Status != "rejected" || got[0].NotAfter.IsZero() {
		t.Errorf("list = %+v, want the one rejected certificate with its validity", got)
	}
}

func TestServer_CertRoutes_Refusals(t *testing.T) {
	tests := []struct {
		name, method, path, token string
		certs                     bool
		want                      int
		kind                      string
	}{
		{"list without designer", "GET", "/api/v1/devices/ua1/certs", tokSandbox, true, http.StatusForbidden, KindPermissionDenied},
		{"trust without designer", "POST", "/api/v1/devices/ua1/certs/" + thumbA + "/trust", tokSandbox, true, http.StatusForbidden, KindPermissionDenied},
		{"reject without credentials", "POST", "/api/v1/devices/ua1/certs/" + thumbA + "/reject", "", true, http.StatusUnauthorized, KindUnauthenticated},
		{"unknown device", "GET", "/api/v1/devices/nope/certs", tokDesigner, true, http.StatusNotFound, KindNotFound},
		{"unknown thumbprint", "POST", "/api/v1/devices/ua1/certs/" + thumbB + "/trust", tokDesigner, true, http.StatusNotFound, KindNotFound},
		{"malformed thumbprint", "POST", "/api/v1/devices/ua1/certs/xyz/trust", tokDesigner, true, http.StatusBadRequest, KindInvalid},
		{"no cert service", "GET", "/api/v1/devices/ua1/certs", tokDesigner, false, http.StatusNotImplemented, KindNotImplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCerts()
			var dc DeviceCerts
			if tt.certs {
				dc = fc
			}
			rec := certDo(t, certServer(t, dc), tt.method, tt.path, tt.token)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if p := problemOf(t, rec); p.Kind != tt.kind {
				t.Errorf("kind %q, want %q", p.Kind, tt.kind)
			}
			if len(fc.moves) != 0 {
				t.Errorf("a refused request moved a certificate: %v", fc.moves)
			}
		})
	}
}

func TestServer_TrustCert_MovesWithTheCallersGrant(t *testing.T) {
	fc := newFakeCerts()
	s := certServer(t, fc)
	// Upper-case hex is the same thumbprint.
	rec := certDo(t, s, "POST", "/api/v1/devices/ua1/certs/0123456789ABCDEF0123456789ABCDEF01234567/trust", tokDesigner)
	if rec.Code != http.StatusOK {
		t.Fatalf("trust: status %d: %s", rec.Code, rec.Body)
	}
	var c apitypes.DeviceCert
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Status != "trusted" || c.Thumbprint != thumbA {
		t.Errorf("trust answered %+v, want %s trusted", c, thumbA)
	}
	rec = certDo(t, s, "POST", "/api/v1/devices/ua1/certs/"+thumbA+"/reject", tokDesigner)
	if rec.Code != http.StatusOK {
		t.Fatalf("reject: status %d: %s", rec.Code, rec.Body)
	}
	want := []string{"trust ua1 " + thumbA + " by designer", "reject ua1 " + thumbA + " by designer"}
	if fmt.Sprint(fc.moves) != fmt.Sprint(want) {
		t.Errorf("moves = %q, want %q", fc.moves, want)
	}
}
