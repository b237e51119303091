package opcua

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

func init() { device.Register("opcua", New) }

// Interface guards.
var (
	_ device.Driver             = (*Driver)(nil)
	_ device.Stater             = (*Driver)(nil)
	_ device.Subscriber         = (*Driver)(nil)
	_ device.IntervalSubscriber = (*Driver)(nil)
	_ device.Browser            = (*Driver)(nil)
	_ device.AddressChecker     = (*Driver)(nil)
	_ device.StatsReporter      = (*Driver)(nil)
)

// States reported by Driver.State, beyond device.Stater's "connected",
// "connecting" and "disconnected".
const (
	// StateDegraded: connected, but some monitored items are bad (a node
	// that vanished, a refused item); the reason counts them.
	StateDegraded = "degraded"
	// StateUntrusted: the server's certificate is not trusted; the reason
	// names its thumbprint (it waits in pki/rejected).
	StateUntrusted = "untrusted"
	// StateRefused: the server or the config refuses the connection (no
	// endpoint with the configured security, a username that would travel
	// in clear, rejected credentials); the driver retries at the backoff's
	// cap.
	StateRefused = "refused"
)

// maxNodesPerCall splits reads and monitored-item creation into requests
// of at most this many nodes (below common servers' operation limits).
const maxNodesPerCall = 500

// Driver is an OPC UA client connection to one server (see the package
// doc). Build it with New; its methods are safe for concurrent use.
type Driver struct {
	name string
	cfg  Config
	log  *slog.Logger

	mu        sync.Mutex
	opened    bool
	closed    bool
	cancel    context.CancelFunc
	done      chan struct{}
	firstTry  chan struct{}
	sess      *session // the live session; nil while down
	changed   chan struct{}
	state     string
	reason    string
	downQ     value.Quality
	downWhy   string
	converted map[string]NodeAddress // ns= address text → its nsu= form
	tagAddr   map[string]string      // tag → nsu= address
	checked   map[string]string      // tag → address text, from CheckPoint
	closing   chan struct{}          // closed by Close
	groups    map[*group]struct{}
	badItems  int
	allItems  int
	badFirst  string

	kick     chan struct{} // wakes the current session's maintainer
	attempts atomic.Int64  // connection attempts, for tests of the backoff

	own      *ownCert
	password string
	userCert []byte
	userKey  *rsa.PrivateKey

	addrs device.ParseCache[NodeAddress] // parsed tag addresses, once per configuration

	stats stats // request and subscription counters (stats.go)
}

// parse returns p's parsed address, parsing each point once (reads, writes
// and subscriptions share the cache).
func (d *Driver) parse(p device.Point) (NodeAddress, error) {
	return d.addrs.Get(device.Point{Address: p.Address}, func(q device.Point) (NodeAddress, error) {
		return ParseAddress(q.Address)
	})
}

// New is the device.Factory of driver "opcua": it strict-decodes cfg.Raw
// over DefaultConfig (an unknown key is an error naming it). It does not
// connect; call Validate, then Open.
func New(cfg device.Config) (device.Driver, error) {
	c, err := ParseConfig(cfg.Raw)
	if err != nil {
		return nil, fmt.Errorf("device %q: %w", cfg.Name, err)
	}
	return NewDriver(cfg.Name, c, cfg.Logger), nil
}

// NewDriver builds a Driver from a decoded Config; log may be nil (no logs).
func NewDriver(name string, c Config, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{
		name:      name,
		cfg:       c,
		log:       log,
		changed:   make(chan struct{}),
		state:     "disconnected",
		reason:    "not opened",
		downQ:     value.BadNotConnected,
		downWhy:   "not opened",
		converted: map[string]NodeAddress{},
		tagAddr:   map[string]string{},
		checked:   map[string]string{},
		closing:   make(chan struct{}),
		groups:    map[*group]struct{}{},
		kick:      make(chan struct{}, 1),
	}
}

// Validate checks the config (Config.Validate). It is pure and fast.
func (d *Driver) Validate() error {
	if err := d.cfg.Validate(); err != nil {
		return fmt.Errorf("device %q: %w", d.name, err)
	}
	return nil
}

// CheckPoint parses p's address (ParseAddress) and checks its type; the
// error names the address text. The driver remembers the tag, so that an
// ns= address is converted to the nsu= form at the first successful
// connection (ResolvedAddresses), before the server can re-order its
// namespaces.
func (d *Driver) CheckPoint(p device.Point) error {
	if _, err := d.parse(p); err != nil {
		return err
	}
	if p.Type == value.TypeUnknown {
		return fmt.Errorf("opcua address %q: no type (want bool, int16, ..., string or auto)", p.Address)
	}
	if p.Encoding != "" || p.StringByteOrder != "" {
		return fmt.Errorf("opcua address %q: encoding and string_byte_order apply to Modbus register strings only (OPC UA strings are UTF-8, Part 6 §5.2.2.4)", p.Address)
	}
	if p.Tag != "" {
		d.mu.Lock()
		d.checked[p.Tag] = p.Address
		d.mu.Unlock()
	}
	return nil
}

// CheckAddress parses an address alone, without its type
// (device.AddressChecker); the error names the address text.
func (d *Driver) CheckAddress(address string) error {
	_, err := d.parse(device.Point{Address: address})
	return err
}

// convertChecked converts the addresses of every checked tag with sess's
// namespace array (the first successful connection converts them all).
func (d *Driver) convertChecked(sess *session) {
	d.mu.Lock()
	todo := make(map[string]string, len(d.checked))
	for tag, addr := range d.checked {
		if _, done := d.tagAddr[tag]; !done {
			todo[tag] = addr
		}
	}
	d.mu.Unlock()
	for tag, addr := range todo {
		_, _ = d.resolve(sess, tag, addr) // a failure shows when the tag is read
	}
}

// Open validates the config, reads the files it names (password, user
// certificate), makes or loads the application instance certificate in
// pki_dir/own, and starts connecting. It waits for the first connection
// attempt (or ctx) so that a Read right after Open sees the server, but a
// server that is away is not an error: the driver keeps reconnecting with
// capped exponential backoff and jitter and reports the outage as quality
// and in State.
func (d *Driver) Open(ctx context.Context) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	own, err := loadOwnCert(d.cfg.PKIDir, d.cfg.appURI(), time.Now())
	if err != nil {
		return fmt.Errorf("device %q: open: %w", d.name, err)
	}
	var password string
	var userCert []byte
	var userKey *rsa.PrivateKey
	switch d.cfg.Auth.kind() {
	case "username":
		b, err := os.ReadFile(d.cfg.Auth.PasswordFile)
		if err != nil {
			return fmt.Errorf("device %q: open: auth.password_file: %w", d.name, err)
		}
		password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	case "certificate":
		if userCert, err = parseCertFile(d.cfg.Auth.CertFile); err != nil {
			return fmt.Errorf("device %q: open: auth.cert_file: %w", d.name, err)
		}
		kb, err := os.ReadFile(d.cfg.Auth.KeyFile)
		if err != nil {
			return fmt.Errorf("device %q: open: auth.key_file: %w", d.name, err)
		}
		if userKey, err = parseRSAKey(kb); err != nil {
			return fmt.Errorf("device %q: open: auth.key_file: %w", d.name, err)
		}
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("device %q: open: driver closed", d.name)
	}
	if d.opened {
		d.mu.Unlock()
		return nil
	}
	d.opened = true
	d.own, d.password, d.userCert, d.userKey = own, password, userCert, userKey
	rctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.done = make(chan struct{})
	d.firstTry = make(chan struct{})
	d.state, d.reason, d.downWhy = "connecting", "connecting", "connecting"
	first := d.firstTry
	d.mu.Unlock()

	go d.run(rctx)
	select {
	case <-first:
	case <-ctx.Done():
	}
	return nil
}

// Close closes the session (CloseSession with DeleteSubscriptions, so the
// server frees it at once: docs/opcua.md, fault C15) and the connection, and
// stops reconnecting. Later reads give Bad_NotConnected ("driver closed").
// Safe after a partial Open and safe to call twice.
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.closing)
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel == nil {
		d.setDown("disconnected", value.BadNotConnected, "driver closed")
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("device %q: close: %w", d.name, ctx.Err())
	}
	d.setDown("disconnected", value.BadNotConnected, "driver closed")
	return nil
}

// State reports the connection for health: "connected"; StateDegraded
// (connected with bad monitored items); "connecting", StateUntrusted or
// StateRefused, each with the reason of the last failure; "disconnected"
// before Open and after Close.
func (d *Driver) State() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess != nil && d.badItems > 0 {
		return StateDegraded, fmt.Sprintf("%d of %d monitored items bad (%s)", d.badItems, d.allItems, d.badFirst)
	}
	return d.state, d.reason
}

// ResolvedAddresses returns, for every tag the driver has read, written or
// monitored, its address in the nsu= form (docs/opcua.md, Tags and addresses:
// an ns= address is converted at the first successful connection, and the
// daemon stores the converted form). Tags whose ns= address has not met a
// session yet are absent.
func (d *Driver) ResolvedAddresses() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.tagAddr))
	for k, v := range d.tagAddr {
		out[k] = v
	}
	return out
}

// current returns the live session, or nil with the quality and reason of
// the outage.
func (d *Driver) current() (*session, value.Quality, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess != nil {
		return d.sess, value.Good, ""
	}
	return nil, d.downQ, d.downWhy
}

// resolve returns the node id of address text addr for sess, converting an
// ns= address to the nsu= form the first time a session sees it and
// recording tag's canonical address.
func (d *Driver) resolve(sess *session, tag, addr string) (*ua.NodeID, error) {
	a, err := d.parse(device.Point{Address: addr})
	if err != nil {
		return nil, device.Errorf(value.BadConfigurationError, "%v", err)
	}
	if !a.HasURI() {
		d.mu.Lock()
		conv, ok := d.converted[addr]
		d.mu.Unlock()
		if !ok {
			if conv, err = a.Canonical(sess.ns); err != nil {
				return nil, device.Errorf(value.BadNodeIDUnknown, "%v", err)
			}
			d.mu.Lock()
			if prev, ok := d.converted[addr]; ok {
				conv = prev
			} else {
				d.converted[addr] = conv
				d.log.Info("opcua: address converted to the namespace URI form",
					slog.String("address", addr), slog.String("canonical", conv.String()))
			}
			d.mu.Unlock()
		}
		a = conv
	}
	if tag != "" {
		d.mu.Lock()
		d.tagAddr[tag] = a.String()
		d.mu.Unlock()
	}
	id, err := a.Resolve(sess.ns)
	if err != nil {
		return nil, device.Errorf(value.BadNodeIDUnknown, "%v", err)
	}
	return id, nil
}

// Read reads the Value attribute of points (OPC UA Part 4 §5.10.2) and
// returns one VQT per point, in order. The value is mapped by fromVariant
// and then coerced to the tag's type (auto keeps the node's); the quality
// comes from the status code through StatusQuality, the raw code kept in
// StatusCode; Time is the source timestamp (else the server's, else now).
// While disconnected every point is Bad_NotConnected (or
// Bad_CertificateUntrusted, Bad_ConfigurationError: why the connection is
// refused). A read that fails because the session was lost
// (BadSessionIdInvalid and kin) waits for the new session and is retried
// once (docs/opcua.md, fault C16).
func (d *Driver) Read(ctx context.Context, points []device.Point) []value.VQT {
	out := make([]value.VQT, len(points))
	if len(points) == 0 {
		return out
	}
	sess, q, why := d.current()
	if sess == nil {
		d.stats.Observe(device.ErrNotConnected, -1, true)
		fillBad(out, q, why)
		return out
	}
	err := d.readOnce(ctx, sess, points, out)
	if err != nil && isSessionErr(err) {
		sess.fail(err)
		if next := d.waitSession(ctx, sess); next != nil {
			err = d.readOnce(ctx, next, points, out)
		}
	}
	if err != nil {
		q, why := device.QualityOf(err)
		if code, ok := asStatus(err); ok {
			q, why = StatusQuality(uint32(code)), statusReason(code)
		}
		if isConnErr(err) {
			sess.fail(err)
			q, why = value.BadNotConnected, "connection lost: "+err.Error()
		}
		fillBad(out, q, why)
	}
	return out
}

func fillBad(out []value.VQT, q value.Quality, why string) {
	now := time.Now().UTC()
	for i := range out {
		out[i] = value.Bad(q, why, now)
	}
}

// readOnce reads points over sess into out; it returns an error when a
// whole request failed.
func (d *Driver) readOnce(ctx context.Context, sess *session, points []device.Point, out []value.VQT) error {
	now := time.Now().UTC()
	type slot struct {
		idx int
		id  *ua.NodeID
	}
	var slots []slot
	for i, p := range points {
		id, err := d.resolve(sess, p.Tag, p.Address)
		if err != nil {
			q, why := device.QualityOf(err)
			out[i] = value.Bad(q, why, now)
			continue
		}
		slots = append(slots, slot{i, id})
	}
	for start := 0; start < len(slots); start += maxNodesPerCall {
		part := slots[start:min(start+maxNodesPerCall, len(slots))]
		req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnBoth}
		for _, s := range part {
			req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: s.id, AttributeID: ua.AttributeIDValue})
		}
		start := time.Now()
		res, err := guarded(ctx, time.Duration(d.cfg.Timeout), func(c context.Context) (*ua.ReadResponse, error) {
			return sess.c.Read(c, req)
		})
		d.observe(start, err, true)
		if err != nil {
			return err
		}
		if len(res.Results) != len(part) {
			return fmt.Errorf("read: %d results for %d nodes", len(res.Results), len(part))
		}
		for k, s := range part {
			out[s.idx] = vqtOf(res.Results[k], points[s.idx].Type)
		}
	}
	return nil
}

// vqtOf maps one DataValue to a VQT for a tag of type t.
func vqtOf(dv *ua.DataValue, t value.Type) (out value.VQT) {
	now := time.Now().UTC()
	if dv == nil {
		return value.Bad(value.BadCommunicationError, "no data value", now)
	}
	// Timestamps decoded from their raw ticks (datetime.go): no date is
	// absent, a date the data path cannot store is replaced by the
	// arrival time, a future one kept as sent; each with a note.
	src, srcNote := stamp(dv.SourceTimestamp, now, "source")
	srv, srvNote := stamp(dv.ServerTimestamp, now, "server")
	ts := now
	switch {
	case !src.IsZero():
		ts = src
	case !srv.IsZero() && srcNote == "":
		ts = srv
	}
	code := dv.Status
	q := StatusQuality(uint32(code))
	out = value.VQT{Quality: q, Time: ts, StatusCode: uint32(code), ServerTime: srv}
	if q != value.Good || code != 0 {
		// A Good subcode (GoodClamped 0x00300000) has quality Good and says
		// what it is here, beside the raw code.
		out.Reason = statusReason(code)
	}
	defer func() { out.Reason = joinNotes(out.Reason, srcNote, srvNote) }()
	if code == ua.StatusBadDataTypeIDUnknown && dv.Value != nil {
		if eo, ok := dv.Value.Value().(*ua.ExtensionObject); ok {
			out.Reason = fmt.Sprintf("extension object of type %s is not decodable (%s)", typeIDText(eo.TypeID), statusReason(code))
		}
		return out
	}
	if q.IsBad() {
		return out
	}
	var note string
	v, err := fromVariantNote(dv.Value, &note)
	if err == nil {
		v, err = coerceToTag(t, v)
	}
	if err != nil {
		out.Quality = value.CoerceQuality(err)
		out.Reason = err.Error()
		return out
	}
	out.Value = v
	if note != "" {
		// A value at the limit of what OPC UA encodes is not a Good
		// reading (Part 6 §5.2.2.5: "should be treated as invalid").
		out.Quality = value.Uncertain
		out.Reason = joinNotes(out.Reason, note)
	}
	return out
}

// joinNotes joins the non-empty parts of a reason with "; ".
func joinNotes(parts ...string) string {
	out := ""
	for _, p := range parts {
		switch {
		case p == "":
		case out == "":
			out = p
		default:
			out += "; " + p
		}
	}
	return out
}

// Write writes v to p's Value attribute once and never retries (OPC UA Part
// 4 §5.10.4; docs/architecture.md, Rules from the field). v comes coerced to the tag's type
// (device.Coerce, the write path's one coercion; auto leaves it as sent)
// and is converted here to the node's built-in type, read once per session (DataType,
// ValueRank, AccessLevel, UserAccessLevel) and cached; a lossy coercion is
// refused with Bad_TypeMismatch (a value out of the type's range with
// Bad_OutOfRange) before anything is sent, and a node whose access level
// forbids writing with Bad_NotWritable. A bad status from the server maps
// through StatusQuality. A write that failed after it was sent (a timeout,
// a dropped connection) is Uncertain: "write timed out; it may have been
// applied". Every error is a *device.QualityError.
func (d *Driver) Write(ctx context.Context, p device.Point, v value.Value) error {
	if _, err := d.parse(p); err != nil {
		return device.Errorf(value.BadConfigurationError, "%v", err)
	}
	v = value.Normalize(v)
	sess, q, why := d.current()
	if sess == nil {
		d.stats.Observe(device.ErrNotConnected, -1, false)
		return device.Errorf(q, "%s", why)
	}
	id, err := d.resolve(sess, p.Tag, p.Address)
	if err != nil {
		return err
	}
	ti, err := sess.typeOf(ctx, id)
	if err != nil {
		return err
	}
	if !ti.writable {
		return device.Errorf(value.BadNotWritable, "%s is not writable (AccessLevel/UserAccessLevel lack CurrentWrite)", p.Address)
	}
	variant, err := toVariant(ti, v)
	if err != nil {
		return coerceError(p, err)
	}
	req := &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{
		NodeID:      id,
		AttributeID: ua.AttributeIDValue,
		Value:       &ua.DataValue{EncodingMask: ua.DataValueValue, Value: variant},
	}}}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(d.cfg.Timeout))
	defer cancel()
	start := time.Now()
	res, err := guarded(wctx, time.Duration(d.cfg.Timeout), func(c context.Context) (*ua.WriteResponse, error) {
		return sess.c.Write(c, req)
	})
	if err == nil && len(res.Results) == 1 && StatusQuality(uint32(res.Results[0])) != value.Good {
		d.stats.Observe(device.ErrException, time.Since(start), false)
	} else {
		d.observe(start, err, false)
	}
	if err != nil {
		if isConnErr(err) {
			sess.fail(err)
		}
		if notSent(err) {
			return device.Errorf(value.BadNotConnected, "write not sent: %v", err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ua.StatusBadTimeout) {
			return device.Errorf(value.Uncertain, "write timed out; it may have been applied")
		}
		if code, ok := asStatus(err); ok && !isConnErr(err) {
			return device.Errorf(StatusQuality(uint32(code)), "%s", statusReason(code))
		}
		return device.Errorf(value.Uncertain, "write failed after it was sent (%v); it may have been applied", err)
	}
	if len(res.Results) != 1 {
		return device.Errorf(value.Uncertain, "write answered with %d results; it may have been applied", len(res.Results))
	}
	code := res.Results[0]
	if StatusQuality(uint32(code)) == value.Good {
		return nil
	}
	if code&codeMask == ua.StatusBadTypeMismatch {
		sess.types.Delete(id.String())
	}
	return device.Errorf(StatusQuality(uint32(code)), "%s", statusReason(code))
}

func coerceError(p device.Point, err error) error {
	return device.Errorf(value.CoerceQuality(err), "%s (%s): %v", p.Address, p.Type, err)
}

// typeOf returns (and caches for the session) what a write needs to know
// about node id.
func (s *session) typeOf(ctx context.Context, id *ua.NodeID) (typeInfo, error) {
	key := id.String()
	if ti, ok := s.types.Load(key); ok {
		return ti.(typeInfo), nil
	}
	attrs := []ua.AttributeID{ua.AttributeIDDataType, ua.AttributeIDValueRank, ua.AttributeIDAccessLevel, ua.AttributeIDUserAccessLevel, ua.AttributeIDValue}
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	for _, a := range attrs {
		req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: id, AttributeID: a})
	}
	res, err := guarded(ctx, time.Duration(s.d.cfg.Timeout), func(c context.Context) (*ua.ReadResponse, error) {
		return s.c.Read(c, req)
	})
	if err != nil {
		if isConnErr(err) {
			s.fail(err)
			return typeInfo{}, device.Errorf(value.BadNotConnected, "write not sent: %v", err)
		}
		q, why := device.QualityOf(err)
		if code, ok := asStatus(err); ok {
			q, why = StatusQuality(uint32(code)), statusReason(code)
		}
		return typeInfo{}, device.Errorf(q, "write not sent: reading the node's data type: %s", why)
	}
	if len(res.Results) != len(attrs) {
		return typeInfo{}, device.Errorf(value.BadCommunicationError, "reading the node's data type: %d results", len(res.Results))
	}
	if code := res.Results[0].Status; StatusQuality(uint32(code)) != value.Good {
		return typeInfo{}, device.Errorf(StatusQuality(uint32(code)), "%s", statusReason(code))
	}
	var ti typeInfo
	dt, _ := variantValue(res.Results[0]).(*ua.NodeID)
	ti.dataType = dt.String()
	ti.builtin = builtinOf(dt)
	rank, _ := variantValue(res.Results[1]).(int32)
	al, _ := variantValue(res.Results[2]).(uint8)
	ual, ok := variantValue(res.Results[3]).(uint8)
	if !ok {
		ual = al
	}
	ti.writable = al&uint8(ua.AccessLevelTypeCurrentWrite) != 0 && ual&uint8(ua.AccessLevelTypeCurrentWrite) != 0
	cur := res.Results[4].Value
	switch {
	case rank >= 0:
		ti.array = true
	case rank == -2 || rank == -3:
		ti.array = cur != nil && cur.Has(ua.VariantArrayValues)
	}
	if ti.builtin == 0 {
		if cur != nil && cur.Type() != ua.TypeIDNull && cur.Type() <= ua.TypeIDLocalizedText {
			ti.builtin = cur.Type()
		} else {
			ti.reason = fmt.Sprintf("cannot write DataType %s: its built-in type is unknown and the node's value does not tell", ti.dataType)
		}
	}
	s.types.Store(key, ti)
	return ti, nil
}

func variantValue(dv *ua.DataValue) any {
	if dv == nil || dv.Value == nil {
		return nil
	}
	return dv.Value.Value()
}
