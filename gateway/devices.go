package gateway

import (
	"context"
	"time"

	"qubiq.dev/edge/auth"
)

// Devices are the project's devices: their state, their scan plan, the
// address space of those that have one (OPC UA) and the certificate
// stores of OPC UA devices.
type Devices interface {
	// ListDevices lists the project's devices in project order.
	ListDevices(ctx context.Context) []DeviceInfo
	// DevicePlan returns the requests one scan of the device sends, per
	// scan class (Modbus request planning); an unknown device wraps
	// ErrNotFound; a driver without planning gives an empty plan.
	DevicePlan(ctx context.Context, name string) ([]PlannedRequest, error)
	// BrowseDevice returns the children of node ("" the root) in the
	// device's address space. An unknown device or node wraps ErrNotFound,
	// a driver that cannot browse or a malformed node ErrInvalid, a device
	// that cannot answer now ErrUnavailable.
	BrowseDevice(ctx context.Context, g auth.Grant, name, node string) ([]BrowseNode, error)
	// ListCerts lists the certificate store of an OPC UA device: the
	// servers' certificates trusted and rejected, and qubiqd's own. An
	// unknown device wraps ErrNotFound, a device without a store
	// (another driver) ErrInvalid.
	ListCerts(ctx context.Context, device string) ([]DeviceCert, error)
	// TrustCert moves a server certificate (thumbprint: 40 lower-case hex
	// digits) from rejected to trusted on behalf of g; the device
	// connects with it at once. Audited; refused (ErrUnavailable) when the
	// record cannot be queued; a thumbprint the store lacks wraps
	// ErrNotFound. It returns the certificate with its new status.
	TrustCert(ctx context.Context, g auth.Grant, device, thumbprint string) (DeviceCert, error)
	// RejectCert moves a certificate from trusted to rejected (audited,
	// as TrustCert): the device refuses the server at its next connection.
	RejectCert(ctx context.Context, g auth.Grant, device, thumbprint string) (DeviceCert, error)
}

// DeviceInfo is one device: name, driver, URL (when its config has one),
// connection state ("connected", "connecting", "demoted", ...) and why,
// and how many tags it serves.
type DeviceInfo struct {
	Name   string
	Driver string
	URL    string
	State  string
	Reason string
	Tags   int
}

// PlannedRequest is one request of a device's scan plan: its scan class,
// the Modbus function code (Modbus Application Protocol v1.1b3 §6), unit
// id, first PDU address, quantity, and the tags it serves.
type PlannedRequest struct {
	Scan         time.Duration
	FunctionCode int
	UnitID       int
	Start        int
	Count        int
	Tags         []string
}

// BrowseNode is one node of a device's address space (OPC UA Part 4
// §5.8.2): its node id (nsu= form, usable as a tag address), browse name,
// node class, data type (for variables) and whether it is writable.
type BrowseNode struct {
	NodeID     string
	BrowseName string
	NodeClass  string
	DataType   string
	Writable   bool
}

// Certificate statuses of DeviceCert.Status.
const (
	CertTrusted  = "trusted"
	CertRejected = "rejected"
	CertOwn      = "own"
)

// DeviceCert is one certificate of an OPC UA device's store: its SHA-1
// thumbprint in lower-case hex (OPC UA Part 6 §6.1), status (CertTrusted,
// CertRejected, CertOwn), subject and issuer, application URI and DNS
// names, validity (UTC), whether it expired by the daemon's clock, and
// whether it is a CA.
type DeviceCert struct {
	Device         string
	Thumbprint     string
	Status         string
	Subject        string
	Issuer         string
	ApplicationURI string
	DNSNames       []string
	NotBefore      time.Time
	NotAfter       time.Time
	Expired        bool
	IsCA           bool
}
