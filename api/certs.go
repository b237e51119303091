package api

import (
	"context"
	"net/http"
	"strings"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// DeviceCerts is the certificate store of the project's OPC UA devices as
// the API sees it (DESIGN.md, Data directory: pki/ own/, trusted/,
// rejected/; REST: /devices/{name}/certs...). It is the optional Deps.Certs:
// nil makes the cert routes answer 501. Thumbprints are 40 lower-case hex
// digits (the server normalises and checks them before calling).
//
// Errors: an unknown device, or a thumbprint no certificate of the store
// has, wraps ErrNotFound (404); a device whose driver has no certificate
// store wraps ErrInvalid (400); a change whose audit record cannot be
// queued wraps ErrUnavailable (503, nothing changed).
type DeviceCerts interface {
	// ListCerts lists the certificates of device's store: the servers'
	// certificates trusted and rejected, and qubiqd's own (to install on
	// the server), sorted by status then subject.
	ListCerts(ctx context.Context, device string) ([]apitypes.DeviceCert, error)
	// TrustCert moves the certificate from rejected to trusted on behalf
	// of g (audited), so the device connects with it at once, without a
	// restart; it returns the certificate with its new status. Trusting a
	// trusted certificate changes nothing and is not an error.
	TrustCert(ctx context.Context, g auth.Grant, device, thumbprint string) (apitypes.DeviceCert, error)
	// RejectCert moves the certificate from trusted to rejected (audited):
	// the device refuses the server at its next connection.
	RejectCert(ctx context.Context, g auth.Grant, device, thumbprint string) (apitypes.DeviceCert, error)
}

// Handlers of the cert routes (routes_certs.go). The middleware has checked
// the designer permission.

// deviceCerts returns the dependency, or the 501 every cert route answers
// without one.
func (s *Server) deviceCerts(r *http.Request) (DeviceCerts, error) {
	if s.deps.Certs == nil {
		return nil, errorf(http.StatusNotImplemented, KindNotImplemented,
			"%s %s is not available in this daemon (device certificates)", r.Method, r.URL.Path)
	}
	return s.deps.Certs, nil
}

// thumbprintParam returns the route's {thumbprint} in lower case, or a 400
// unless it is 40 hex digits (a SHA-1).
func thumbprintParam(r *http.Request) (string, error) {
	tp := strings.ToLower(r.PathValue("thumbprint"))
	ok := len(tp) == 40
	for i := 0; ok && i < len(tp); i++ {
		c := tp[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
	}
	if !ok {
		return "", errorf(http.StatusBadRequest, KindInvalid,
			"thumbprint %q is not a certificate thumbprint (40 hex digits, the SHA-1 of the certificate; see the list)", r.PathValue("thumbprint"))
	}
	return tp, nil
}

func (s *Server) listCerts(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	dc, err := s.deviceCerts(r)
	if err != nil {
		return err
	}
	certs, err := dc.ListCerts(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, nonNil(certs))
	return nil
}

func (s *Server) trustCert(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	return s.moveCert(w, r, g, DeviceCerts.TrustCert)
}

func (s *Server) rejectCert(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	return s.moveCert(w, r, g, DeviceCerts.RejectCert)
}

func (s *Server) moveCert(w http.ResponseWriter, r *http.Request, g auth.Grant,
	move func(DeviceCerts, context.Context, auth.Grant, string, string) (apitypes.DeviceCert, error)) error {
	dc, err := s.deviceCerts(r)
	if err != nil {
		return err
	}
	tp, err := thumbprintParam(r)
	if err != nil {
		return err
	}
	c, err := move(dc, r.Context(), g, r.PathValue("name"), tp)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, c)
	return nil
}
