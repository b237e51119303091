package apitypes

import "time"

// Certificate statuses of DeviceCert.Status: the store folders of an OPC UA
// device's pki directory (docs/config.md, Data directory: pki/ own/, trusted/,
// rejected/).
const (
	CertTrusted  = "trusted"  // a server certificate the device accepts
	CertRejected = "rejected" // a server certificate refused (parked for review)
	CertOwn      = "own"      // qubiqd's own application instance certificate
)

// DeviceCert is one certificate of an OPC UA device's certificate store:
// an element of GET /api/v1/devices/{name}/certs, and the answer of POST
// /api/v1/devices/{name}/certs/{thumbprint}/trust and .../reject (then with
// its new Status). Thumbprint is the SHA-1 of the DER certificate in
// lower-case hex (OPC UA Part 6 §6.1); NotBefore and NotAfter bound its
// validity (UTC); Expired says whether NotAfter has passed, by the daemon's
// clock.
type DeviceCert struct {
	Device         string    `json:"device"`
	Thumbprint     string    `json:"thumbprint"`
	Status         string    `json:"status"`
	Subject        string    `json:"subject"`
	Issuer         string    `json:"issuer"`
	ApplicationURI string    `json:"application_uri,omitempty"`
	DNSNames       []string  `json:"dns_names,omitempty"`
	NotBefore      time.Time `json:"not_before"`
	NotAfter       time.Time `json:"not_after"`
	Expired        bool      `json:"expired"`
	IsCA           bool      `json:"is_ca"`
}
