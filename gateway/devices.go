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
	// ListDevices lists the project's devices in project order, each with
	// its statistics.
	ListDevices(ctx context.Context) []DeviceInfo
	// Device returns one device with its statistics; an unknown device
	// wraps ErrNotFound.
	Device(ctx context.Context, name string) (DeviceInfo, error)
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
// how many tags it serves, and its statistics (nil for a driver that
// keeps none, such as the simulator).
type DeviceInfo struct {
	Name   string
	Driver string
	URL    string
	State  string
	Reason string
	Tags   int
	Stats  *DeviceStats
}

// DeviceStats are one device's request statistics since its driver was
// built (docs/metrics.md, "Devices"): requests sent (reads, writes,
// keep-alive reads), the failed ones by kind ("timeout",
// "not_connected", "communication", "exception", "configuration";
// ErrorsTotal their sum, Timeouts the "timeout" ones), connections made
// again after a loss, the last successful read and the last failure (zero:
// never), the latency histogram with its estimated median and 99th
// percentile, the Modbus circuit breaker per unit, and the OPC UA
// subscription figures (nil for other drivers).
type DeviceStats struct {
	Requests    uint64
	Errors      map[string]uint64
	ErrorsTotal uint64
	Timeouts    uint64
	Reconnects  uint64
	LastGood    time.Time
	LastError   time.Time
	P50, P99    time.Duration
	Latency     LatencyHistogram
	Units       []UnitBreaker
	OPCUA       *OPCUAFigures
}

// LatencyHistogram is a histogram of request latencies: Counts[i] requests
// took at most Bounds[i] seconds (and more than the bound before); the
// last element of Counts, one more than Bounds, counts those above every
// bound. Count is their total, Sum their total time.
type LatencyHistogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// UnitBreaker is one Modbus unit's circuit breaker (docs/modbus.md): its
// unit id, state ("closed", "open", "probing"), consecutive timeouts and,
// while open, until when.
type UnitBreaker struct {
	Unit         int
	Breaker      string
	Timeouts     int
	DemotedUntil time.Time
}

// OPCUAFigures are an OPC UA device's subscription figures: monitored items
// and the bad ones now, subscriptions live on the server, publish
// responses with data and keep-alive ones (OPC UA Part 4 §5.13.1.1), data
// changes delivered, publish responses per second of the current session,
// sessions created and re-activated.
type OPCUAFigures struct {
	MonitoredItems     int
	BadItems           int
	Subscriptions      int
	PublishResponses   uint64
	KeepAlives         uint64
	DataChanges        uint64
	PublishRate        float64
	SessionsCreated    uint64
	SessionsReactivate uint64
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
