package opcuastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device/opcua"
	"qubiq.dev/edge/gateway"
)

// driverName is the OPC UA driver's registered name.
const driverName = "opcua"

// PKIDir is the default certificate store of OPC UA devices: <dataDir>/pki
// (README: where the data lives), unless a device's config names a pki_dir.
func PKIDir(dataDir string) string { return filepath.Join(dataDir, "pki") }

// Defaults returns the device defaults of the data dir: an OPC UA device's
// driver keys get pki_dir = PKIDir(dataDir) unless they name one; other
// drivers' keys are returned unchanged. It is the service's
// Options.DeviceDefaults and --check-config's.
func Defaults(dataDir string) func(driver string, raw json.RawMessage) json.RawMessage {
	return func(driver string, raw json.RawMessage) json.RawMessage {
		if driver != driverName {
			return raw
		}
		return withDefaultKey(raw, "pki_dir", PKIDir(dataDir))
	}
}

// withDefaultKey returns the JSON object raw with key set to val when raw
// does not have it; raw is returned unchanged when it is not an object.
func withDefaultKey(raw json.RawMessage, key string, val any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return raw
		}
	}
	if _, ok := m[key]; ok {
		return raw
	}
	b, err := json.Marshal(val)
	if err != nil {
		return raw
	}
	m[key] = b
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// Certs are the certificate stores of the project's OPC UA devices
// (service.CertStores). Devices that share a pki directory share its trust
// decisions; a trust wakes the drivers waiting on an untrusted server
// (opcua.TrustCert), so values flow without a restart.
type Certs struct {
	DataDir string
}

// Dir returns the pki directory an OPC UA device's driver uses: its
// pki_dir, else PKIDir(DataDir). ok is false for other drivers.
func (c Certs) Dir(dc config.DeviceConfig) (string, bool, error) {
	if dc.Driver != driverName {
		return "", false, nil
	}
	cfg, err := opcua.ParseConfig(Defaults(c.DataDir)(dc.Driver, dc.Raw))
	if err != nil {
		return "", true, err
	}
	return cfg.PKIDir, true, nil
}

// List lists a store's certificates (opcua.ListCerts).
func (c Certs) List(dir string) ([]gateway.DeviceCert, error) {
	infos, err := opcua.ListCerts(dir)
	if err != nil {
		return nil, err
	}
	out := make([]gateway.DeviceCert, 0, len(infos))
	for _, ci := range infos {
		out = append(out, gateway.DeviceCert{Thumbprint: ci.Thumbprint, Status: ci.Status, Subject: ci.Subject,
			Issuer: ci.Issuer, ApplicationURI: ci.ApplicationURI, DNSNames: ci.DNSNames, NotBefore: ci.NotBefore,
			NotAfter: ci.NotAfter, IsCA: ci.IsCA})
	}
	return out, nil
}

// Trust moves a certificate from rejected to trusted (opcua.TrustCert).
func (c Certs) Trust(dir, thumbprint string) error { return certErr(opcua.TrustCert(dir, thumbprint)) }

// Reject moves a certificate from trusted to rejected (opcua.RejectCert).
func (c Certs) Reject(dir, thumbprint string) error {
	return certErr(opcua.RejectCert(dir, thumbprint))
}

func certErr(err error) error {
	if errors.Is(err, opcua.ErrCertNotFound) {
		return fmt.Errorf("%w: %v", gateway.ErrNotFound, err)
	}
	return err
}
