package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagengine"
)

// The project's devices, their scan plan and the OPC UA certificate
// stores (gateway.Devices).

// ListDevices lists the devices in project order with their state.
func (s *Service) ListDevices(context.Context) []gateway.DeviceInfo {
	states := s.Engine().DeviceStates()
	p := s.Project()
	count := map[string]int{}
	for _, t := range p.Tags {
		count[t.Device]++
	}
	var out []gateway.DeviceInfo
	for _, dc := range p.Devices {
		var raw struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(dc.Raw, &raw) // only for display; the driver validated it
		st := states[dc.Name]
		out = append(out, gateway.DeviceInfo{Name: dc.Name, Driver: dc.Driver, URL: raw.URL,
			State: st[0], Reason: st[1], Tags: count[dc.Name]})
	}
	return out
}

// DevicePlan returns a device's scan plan.
func (s *Service) DevicePlan(_ context.Context, name string) ([]gateway.PlannedRequest, error) {
	steps, err := s.Engine().Plan(name)
	if err != nil {
		if errors.Is(err, tagengine.ErrUnknownDevice) {
			return nil, fmt.Errorf("%w: %v", gateway.ErrNotFound, err)
		}
		return nil, err
	}
	out := make([]gateway.PlannedRequest, len(steps))
	for i, st := range steps {
		out[i] = gateway.PlannedRequest{Scan: st.Scan, FunctionCode: st.Function, UnitID: st.Unit,
			Start: st.Start, Count: st.Count, Tags: st.Tags}
	}
	return out, nil
}

// Audit actions of certificate changes.
const (
	actionCertTrust  = "device.cert.trust"
	actionCertReject = "device.cert.reject"
)

// certDir returns a device's certificate store.
func (s *Service) certDir(device string) (string, error) {
	for _, dc := range s.Project().Devices {
		if dc.Name != device {
			continue
		}
		dir, ok, err := s.optsCerts().Dir(dc)
		if err != nil {
			return "", fmt.Errorf("device %q: %w", device, err)
		}
		if !ok {
			return "", fmt.Errorf("%w: device %q uses driver %s, which has no certificate store (only opcua devices have one)",
				gateway.ErrInvalid, device, dc.Driver)
		}
		return dir, nil
	}
	return "", fmt.Errorf("device %q: %w (GET /api/v1/devices lists them)", device, gateway.ErrNotFound)
}

// ListCerts lists a device's certificate store.
func (s *Service) ListCerts(_ context.Context, device string) ([]gateway.DeviceCert, error) {
	dir, err := s.certDir(device)
	if err != nil {
		return nil, err
	}
	certs, err := s.optsCerts().List(dir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for i := range certs {
		certs[i].Device, certs[i].Expired = device, now.After(certs[i].NotAfter)
	}
	return certs, nil
}

// TrustCert moves a certificate from rejected to trusted, audited.
func (s *Service) TrustCert(_ context.Context, g auth.Grant, device, thumbprint string) (gateway.DeviceCert, error) {
	return s.moveCert(g, device, thumbprint, actionCertTrust, gateway.CertTrusted, s.optsCerts().Trust)
}

// RejectCert moves a certificate from trusted to rejected, audited.
func (s *Service) RejectCert(_ context.Context, g auth.Grant, device, thumbprint string) (gateway.DeviceCert, error) {
	return s.moveCert(g, device, thumbprint, actionCertReject, gateway.CertRejected, s.optsCerts().Reject)
}

func (s *Service) optsCerts() CertStores {
	if s.opts.Certs == nil {
		return noCerts{}
	}
	return s.opts.Certs
}

// moveCert moves a certificate that is not the appliance's own; the change
// is refused unless its audit record can be queued (one record per
// administrative change).
func (s *Service) moveCert(g auth.Grant, device, thumbprint, action, to string, fn func(dir, thumbprint string) error) (gateway.DeviceCert, error) {
	dir, err := s.certDir(device)
	if err != nil {
		return gateway.DeviceCert{}, err
	}
	tp := strings.ToLower(thumbprint)
	certs, err := s.optsCerts().List(dir)
	if err != nil {
		return gateway.DeviceCert{}, err
	}
	var cert *gateway.DeviceCert
	for i := range certs {
		if certs[i].Thumbprint == tp && certs[i].Status != gateway.CertOwn {
			cert = &certs[i]
			break
		}
	}
	if cert == nil {
		return gateway.DeviceCert{}, fmt.Errorf("device %q: certificate %s: %w (neither trusted nor rejected; devices certs list shows the store)",
			device, tp, gateway.ErrNotFound)
	}
	if err := s.canAudit(); err != nil {
		return gateway.DeviceCert{}, fmt.Errorf("%w: %s of certificate %s not made: %v", gateway.ErrUnavailable, action, tp, err)
	}
	from := cert.Status
	if err := fn(dir, tp); err != nil {
		return gateway.DeviceCert{}, fmt.Errorf("device %q: %w", device, err)
	}
	cert.Status = to
	s.auditAdmin(g, action, device, map[string]any{"thumbprint": tp, "subject": cert.Subject,
		"not_after": cert.NotAfter, "from": from, "to": to, "pki_dir": dir})
	s.log.Info("opcua: certificate moved", slog.String("device", device), slog.String("thumbprint", tp),
		slog.String("subject", cert.Subject), slog.String("from", from), slog.String("to", to), slog.String("principal", g.Principal))
	cert.Device, cert.Expired = device, time.Now().After(cert.NotAfter)
	return *cert, nil
}

// noCerts is the CertStores of a service without any: no device has one.
type noCerts struct{}

func (noCerts) Dir(config.DeviceConfig) (string, bool, error) { return "", false, nil }
func (noCerts) List(string) ([]gateway.DeviceCert, error)     { return nil, nil }
func (noCerts) Trust(string, string) error                    { return gateway.ErrNotFound }
func (noCerts) Reject(string, string) error                   { return gateway.ErrNotFound }
