package api

import (
	"context"
	"net/http"
	"strings"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

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
	out := make([]apitypes.DeviceCert, len(certs))
	for i, c := range certs {
		out[i] = wireCert(c)
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) trustCert(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	return s.moveCert(w, r, g, DeviceCerts.TrustCert)
}

func (s *Server) rejectCert(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	return s.moveCert(w, r, g, DeviceCerts.RejectCert)
}

func (s *Server) moveCert(w http.ResponseWriter, r *http.Request, g auth.Grant,
	move func(DeviceCerts, context.Context, auth.Grant, string, string) (gateway.DeviceCert, error)) error {
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
	s.writeJSON(w, r, http.StatusOK, wireCert(c))
	return nil
}
