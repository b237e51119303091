package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device/opcua"
)

// certsAPI is api.DeviceCerts over the certificate stores of the project's
// OPC UA devices (DESIGN.md, Data directory: <data_dir>/pki with own/,
// trusted/, rejected/, or the device's own pki_dir). Devices that share a
// pki directory share its trust decisions. A trust or reject is audited
// (auditAdmin, action "device.cert.trust" / "device.cert.reject", target the
// device) and refused with 503 while the audit log cannot take the record;
// the drivers waiting on an untrusted server retry at once
// (opcua.TrustCert wakes them), so values flow without a restart.
type certsAPI struct{ s *System }

// Audit actions of certificate changes.
const (
	actionCertTrust  = "device.cert.trust"
	actionCertReject = "device.cert.reject"
)

// pkiDir returns device's certificate store: the pki_dir its driver uses
// (BuildDevices's default, <data_dir>/pki, unless the device names one).
func (c certsAPI) pkiDir(device string) (string, error) {
	for _, dc := range c.s.Project().Devices {
		if dc.Name != device {
			continue
		}
		if dc.Driver != "opcua" {
			return "", fmt.Errorf("%w: device %q uses driver %s, which has no certificate store (only opcua devices have one)",
				api.ErrInvalid, device, dc.Driver)
		}
		cfg, err := opcua.ParseConfig(withDefaultKey(dc.Raw, "pki_dir", filepath.Join(c.s.Config.DataDir, "pki")))
		if err != nil {
			return "", fmt.Errorf("device %q: %w", device, err)
		}
		return cfg.PKIDir, nil
	}
	return "", fmt.Errorf("device %q: %w (GET /api/v1/devices lists them)", device, api.ErrNotFound)
}

func deviceCert(device string, ci opcua.CertInfo, now time.Time) apitypes.DeviceCert {
	return apitypes.DeviceCert{Device: device, Thumbprint: ci.Thumbprint, Status: ci.Status, Subject: ci.Subject,
		Issuer: ci.Issuer, ApplicationURI: ci.ApplicationURI, DNSNames: ci.DNSNames, NotBefore: ci.NotBefore,
		NotAfter: ci.NotAfter, Expired: now.After(ci.NotAfter), IsCA: ci.IsCA}
}

// ListCerts lists device's store (opcua.ListCerts): trusted, rejected and
// qubiqd's own certificates.
func (c certsAPI) ListCerts(_ context.Context, device string) ([]apitypes.DeviceCert, error) {
	dir, err := c.pkiDir(device)
	if err != nil {
		return nil, err
	}
	infos, err := opcua.ListCerts(dir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]apitypes.DeviceCert, 0, len(infos))
	for _, ci := range infos {
		out = append(out, deviceCert(device, ci, now))
	}
	return out, nil
}

// TrustCert moves the certificate from rejected/ to trusted/
// (opcua.TrustCert) and audits it.
func (c certsAPI) TrustCert(ctx context.Context, g auth.Grant, device, thumbprint string) (apitypes.DeviceCert, error) {
	return c.move(ctx, g, device, thumbprint, actionCertTrust, opcua.CertTrusted, opcua.TrustCert)
}

// RejectCert moves the certificate from trusted/ to rejected/
// (opcua.RejectCert) and audits it.
func (c certsAPI) RejectCert(ctx context.Context, g auth.Grant, device, thumbprint string) (apitypes.DeviceCert, error) {
	return c.move(ctx, g, device, thumbprint, actionCertReject, opcua.CertRejected, opcua.RejectCert)
}

func (c certsAPI) move(_ context.Context, g auth.Grant, device, thumbprint, action, to string,
	fn func(pkiDir, thumbprint string) error) (apitypes.DeviceCert, error) {
	dir, err := c.pkiDir(device)
	if err != nil {
		return apitypes.DeviceCert{}, err
	}
	tp := strings.ToLower(thumbprint)
	infos, err := opcua.ListCerts(dir)
	if err != nil {
		return apitypes.DeviceCert{}, err
	}
	var cert *opcua.CertInfo
	for i := range infos {
		if infos[i].Thumbprint == tp && infos[i].Status != opcua.CertOwn {
			cert = &infos[i]
			break
		}
	}
	if cert == nil {
		return apitypes.DeviceCert{}, fmt.Errorf("device %q: certificate %s: %w (neither trusted nor rejected; devices certs list shows the store)",
			device, tp, api.ErrNotFound)
	}
	// The change is refused unless its audit record can be queued
	// (DESIGN.md, Audit: one record per administrative change).
	if err := (auditSink{c.s}).CanAudit(); err != nil {
		return apitypes.DeviceCert{}, fmt.Errorf("%w: %s of certificate %s not made: %v", api.ErrUnavailable, action, tp, err)
	}
	from := cert.Status
	if err := fn(dir, tp); err != nil {
		if errors.Is(err, opcua.ErrCertNotFound) {
			return apitypes.DeviceCert{}, fmt.Errorf("device %q: %w: %v", device, api.ErrNotFound, err)
		}
		return apitypes.DeviceCert{}, fmt.Errorf("device %q: %w", device, err)
	}
	cert.Status = to
	c.s.auditAdmin(g, action, device, map[string]any{"thumbprint": tp, "subject": cert.Subject,
		"not_after": cert.NotAfter, "from": from, "to": to, "pki_dir": dir})
	c.s.Log.Info("opcua: certificate moved", slog.String("device", device), slog.String("thumbprint", tp),
		slog.String("subject", cert.Subject), slog.String("from", from), slog.String("to", to), slog.String("principal", g.Principal))
	return deviceCert(device, *cert, time.Now()), nil
}
