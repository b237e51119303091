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
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagengine"
)

// The project's devices, their scan plan and the OPC UA certificate
// stores (gateway.Devices).

// ListDevices lists the devices in project order with their state and
// statistics.
func (s *Service) ListDevices(context.Context) []gateway.DeviceInfo {
	eng := s.Engine()
	states, stats := eng.DeviceStates(), eng.DeviceStats()
	rp := s.project.Load()
	p, count := rp.p, rp.perDevice
	var out []gateway.DeviceInfo
	for _, dc := range p.Devices {
		var raw struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(dc.Raw, &raw) // only for display; the driver validated it
		st := states[dc.Name]
		info := gateway.DeviceInfo{Name: dc.Name, Driver: dc.Driver, URL: raw.URL,
			State: st[0], Reason: st[1], Tags: count[dc.Name]}
		if ds, ok := stats[dc.Name]; ok {
			info.Stats = deviceStats(ds)
		}
		out = append(out, info)
	}
	return out
}

// Device returns one device with its statistics.
func (s *Service) Device(ctx context.Context, name string) (gateway.DeviceInfo, error) {
	for _, d := range s.ListDevices(ctx) {
		if d.Name == name {
			return d, nil
		}
	}
	return gateway.DeviceInfo{}, fmt.Errorf("device %q: %w (GET /api/v1/devices lists them)", name, gateway.ErrNotFound)
}

// deviceStats converts a driver's statistics into the service layer's.
func deviceStats(ds device.Stats) *gateway.DeviceStats {
	out := &gateway.DeviceStats{Requests: ds.Requests, Errors: ds.Errors, ErrorsTotal: ds.ErrorsTotal,
		Timeouts: ds.Timeouts, Reconnects: ds.Reconnects, LastGood: ds.LastGood, LastError: ds.LastError,
		P50: ds.P50, P99: ds.P99,
		Latency: gateway.LatencyHistogram{Bounds: device.LatencyBuckets[:], Counts: ds.Latency.Counts,
			Count: ds.Latency.Count, Sum: ds.Latency.Sum}}
	for _, u := range ds.Units {
		out.Units = append(out.Units, gateway.UnitBreaker{Unit: u.Unit, Breaker: u.Breaker, Timeouts: u.Timeouts,
			DemotedUntil: u.DemotedUntil})
	}
	if o := ds.OPCUA; o != nil {
		out.OPCUA = &gateway.OPCUAFigures{MonitoredItems: o.MonitoredItems, BadItems: o.BadItems,
			Subscriptions: o.Subscriptions, PublishResponses: o.PublishResponses, KeepAlives: o.KeepAlives,
			DataChanges: o.DataChanges, PublishRate: o.PublishRate, SessionsCreated: o.SessionsCreated,
			SessionsReactivate: o.SessionReactivate}
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
	for _, dc := range s.running().Devices {
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
