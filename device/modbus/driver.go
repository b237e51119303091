package modbus

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goburrow/modbus"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

func init() { device.Register("modbus", New) }

// Interface guards.
var (
	_ device.Driver         = (*Driver)(nil)
	_ device.Stater         = (*Driver)(nil)
	_ device.Planner        = (*Driver)(nil)
	_ device.WriteChecker   = (*Driver)(nil)
	_ device.AddressChecker = (*Driver)(nil)
	_ device.StatsReporter  = (*Driver)(nil)
)

// Driver is a Modbus TCP device (see the package doc). Build it with New;
// its methods are safe for concurrent use.
type Driver struct {
	name string
	cfg  Config
	log  *slog.Logger
	link *link

	mu       sync.Mutex
	units    map[byte]*unitState
	split    map[reqKey]byte // merged requests refused with exception 2 or 3, and the code
	splitGen uint64          // bumped at each new split: cached plans made before are stale
	plans    planCache

	rmw sync.Mutex // serialises register-bit read-modify-writes

	specs device.ParseCache[spec] // the write path's parsed points (once per configuration)

	stats *device.Counters // request statistics (stats.go)
}

// unitState is one unit's circuit breaker.
type unitState struct {
	timeouts     int       // consecutive timeouts
	demotedUntil time.Time // zero when not demoted
}

// New is the device.Factory of driver "modbus": it strict-decodes cfg.Raw
// over DefaultConfig (an unknown key is an error naming it). It does not
// dial; call Validate, then Open.
func New(cfg device.Config) (device.Driver, error) {
	c, err := ParseConfig(cfg.Raw)
	if err != nil {
		return nil, fmt.Errorf("device %q: %w", cfg.Name, err)
	}
	return NewDriver(cfg.Name, c, cfg.Logger), nil
}

// NewDriver builds a Driver from a decoded Config; log may be nil (no logs).
// A Driver on a serial port or RTU-over-TCP endpoint joins the bus other
// Drivers with the same url share (Config.URL); Close leaves it.
func NewDriver(name string, c Config, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ep, _ := c.endpoint() // a bad url is reported by Validate and Open
	stats := &device.Counters{}
	return &Driver{
		name:  name,
		cfg:   c,
		log:   log,
		stats: stats,
		link:  newLink(ep, c, log, stats),
		units: map[byte]*unitState{},
		split: map[reqKey]byte{},
	}
}

// Validate checks the config (Config.Validate). It is pure and fast.
func (d *Driver) Validate() error {
	if err := d.cfg.Validate(); err != nil {
		return fmt.Errorf("device %q: %w", d.name, err)
	}
	return nil
}

// CheckPoint parses p's address with its type and byte order and checks
// that they go together (docs/modbus.md, Tags and addresses), and that its unit
// id override fits the transport (0..255; 1..247 on RTU, where 0 means the
// device's unit id as everywhere); the error names the address text.
func (d *Driver) CheckPoint(p device.Point) error {
	_, err := d.spec(p)
	return err
}

// CheckAddress parses an address alone, without its type
// (device.AddressChecker); the error names the address text.
func (d *Driver) CheckAddress(address string) error {
	_, err := ParseAddress(address)
	return err
}

// Writable reports whether p's table can be written: coils and holding
// registers, never input registers or discrete inputs (Modbus Application
// Protocol §4.3; device.WriteChecker).
func (d *Driver) Writable(p device.Point) bool {
	a, err := ParseAddress(p.Address)
	return err == nil && a.Table.Writable()
}

func (d *Driver) spec(p device.Point) (spec, error) {
	a, err := ParseAddress(p.Address)
	if err != nil {
		return spec{}, err
	}
	if u, set := p.Unit(); set {
		if u < 0 || u > 255 {
			return spec{}, fmt.Errorf("modbus address %q: unit id %d out of range 0..255", p.Address, u)
		}
		if (u < 1 || u > 247) && d.link.bus.ep.kind != kindTCP {
			return spec{}, fmt.Errorf("modbus address %q: unit id %d out of range 1..247 on a serial line (Modbus over Serial Line §2.2: 0 is the broadcast address, which no slave answers)", p.Address, u)
		}
	}
	s, err := newSpec(a, p.Type, p.ByteOrder)
	if err == nil {
		s, err = s.withStrings(p.StringByteOrder, p.Encoding)
	}
	if err != nil {
		return spec{}, fmt.Errorf("modbus address %q: %w", p.Address, err)
	}
	return s, nil
}

// unitOf is the unit id p's requests go to: its own (unit_id, 0 included)
// or the device's.
func (d *Driver) unitOf(p device.Point) byte {
	if u, set := p.Unit(); set && u >= 0 && u <= 255 {
		return byte(u)
	}
	return byte(d.cfg.UnitID)
}

// Open validates the config and dials (opens the serial port) once. A
// device that is away is not an error: the driver keeps dialling with
// backoff and reports the outage as Bad_NotConnected quality and in State.
// A serial port that another device already uses with other line settings
// is an error (and every read is Bad_ConfigurationError).
func (d *Driver) Open(ctx context.Context) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if d.link.busErr != nil {
		return fmt.Errorf("device %q: open: %w", d.name, d.link.busErr)
	}
	d.link.open(ctx)
	return nil
}

// Close closes the connection, aborting a request in flight, or leaves the
// shared bus (the last Driver on a serial port closes it). Later reads give
// Bad_NotConnected ("driver closed"). Safe after a partial Open and safe to
// call twice.
func (d *Driver) Close(ctx context.Context) error {
	if err := d.link.close(); err != nil {
		return fmt.Errorf("device %q: close: %w", d.name, err)
	}
	return nil
}

// State reports "connected", "connecting" (with the last dial error) or
// "disconnected" (after Close) for health.
//
// A connected device with a demoted unit reports "degraded", naming the
// units, so health shows what the tags already say.
func (d *Driver) State() (string, string) {
	state, reason := d.link.getState()
	if state != "connected" {
		return state, reason
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var units []string
	now := time.Now()
	for id, u := range d.units {
		if !u.demotedUntil.IsZero() && now.Before(u.demotedUntil) {
			units = append(units, strconv.Itoa(int(id)))
		}
	}
	if len(units) == 0 {
		return state, reason
	}
	slices.Sort(units)
	return "degraded", fmt.Sprintf("unit %s demoted after %d timeouts", strings.Join(units, ", "), d.cfg.Breaker.Timeouts)
}

// Read reads points, merged into as few requests as plan allows, and
// returns one VQT per point, in order. A point whose address does not parse
// is Bad_ConfigurationError; a request that fails gives its points the
// quality of the failure (see classify and exceptionError). A merged request
// refused with exception 2 (illegal data address: a bridged gap the device
// lacks) or 3 (illegal data value: typically more registers than the device
// takes in one request) is split (splitRequest) and retried, and the split
// remembered, so that only the points the device really refuses are bad
// (docs/modbus.md, fault C07). A demoted unit's points are Bad_NotConnected
// without a request.
func (d *Driver) Read(ctx context.Context, points []device.Point) []value.VQT {
	out := make([]value.VQT, len(points))
	d.read(ctx, points, out, false)
	return out
}

// ReadInto implements device.IntoReader: Read into out (len(points)
// long), which it clears first. The plan made for points keeps points
// itself, not a copy (device.IntoReader: the caller does not modify it).
func (d *Driver) ReadInto(ctx context.Context, points []device.Point, out []value.VQT) {
	d.read(ctx, points, out, true)
}

func (d *Driver) read(ctx context.Context, points []device.Point, out []value.VQT, keep bool) {
	out = out[:len(points)]
	clear(out)
	p := d.plan(points, out, keep)
	for _, r := range p.reqs {
		d.readRequest(ctx, p, r, out)
	}
}

// Plan implements device.Planner: the read requests that a Read of points
// would send now, in the order it sends them, without sending anything.
// Splits the device forced before (exception 2 or 3 on a merged read) are
// included; points whose address does not parse send nothing and are left
// out. Each request names its function code (1-4), unit id, first PDU
// address, quantity (registers, or bits for FC1/FC2) and the tags it
// serves, in address order.
func (d *Driver) Plan(points []device.Point) []device.PlannedRequest {
	rs := d.plan(points, nil, false).reqs
	out := make([]device.PlannedRequest, 0, len(rs))
	for _, r := range rs {
		pr := device.PlannedRequest{Function: int(r.fc), Unit: int(r.unit), Start: r.start, Count: r.qty,
			Tags: make([]string, 0, len(r.items))}
		for _, it := range r.items {
			pr.Tags = append(pr.Tags, points[it.idx].Tag)
		}
		out = append(out, pr)
	}
	return out
}

// plan parses points and plans their requests, or takes the plan made
// for the same points before (planCache); when out is not nil, a point
// whose address does not parse gets Bad_ConfigurationError there. A new
// plan keeps points itself when keep is set (ReadInto), else a copy.
func (d *Driver) plan(points []device.Point, out []value.VQT, keep bool) *cachedPlan {
	d.mu.Lock()
	gen := d.splitGen
	d.mu.Unlock()
	p := d.plans.get(points, gen)
	if p == nil {
		key := points
		if !keep {
			key = slices.Clone(points)
		}
		p = &cachedPlan{points: key, gen: gen}
		items := make([]item, 0, len(points))
		for i, pt := range points {
			s, err := d.spec(pt)
			if err != nil {
				p.bad = append(p.bad, badPoint{idx: i, reason: err.Error()})
				continue
			}
			items = append(items, item{idx: i, unit: d.unitOf(pt), spec: s})
		}
		p.reqs = plan(items, d.cfg.MaxGap, d.cfg.MaxRegistersPerRequest, d.splitOf)
		d.plans.put(p)
	}
	if out != nil && len(p.bad) > 0 {
		now := time.Now().UTC()
		for _, b := range p.bad {
			out[b.idx] = value.Bad(value.BadConfigurationError, b.reason, now)
		}
	}
	return p
}

func (d *Driver) splitOf(k reqKey) byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.split[k]
}

// readRequest sends r and decodes its points into out. A number whose
// registers are the same as at the last scan of p takes the value decoded
// then (p.last): decoding is a function of the registers alone, so the
// value is the same, without a new one allocated.
func (d *Driver) readRequest(ctx context.Context, p *cachedPlan, r request, out []value.VQT) {
	if reason, demoted := d.demoted(r.unit); demoted {
		fill(out, r, value.BadNotConnected, reason)
		return
	}
	var buf [maxPDUSize]byte
	raw, rerr := d.link.do(ctx, r.unit, true, buf[:0], func(c modbus.Client) ([]byte, error) {
		start, qty := uint16(r.start), uint16(r.qty)
		switch r.fc {
		case 1:
			return c.ReadCoils(start, qty)
		case 2:
			return c.ReadDiscreteInputs(start, qty)
		case 4:
			return c.ReadInputRegisters(start, qty)
		}
		return c.ReadHoldingRegisters(start, qty)
	})
	d.note(r.unit, rerr)
	if rerr != nil {
		if (rerr.exception == 2 || rerr.exception == 3) && len(r.items) > 1 {
			d.log.Info("modbus: merged read refused; splitting it and remembering the split",
				slog.Int("unit", int(r.unit)), slog.Int("function", int(r.fc)), slog.Int("start", r.start),
				slog.Int("quantity", r.qty), slog.Int("exception", int(rerr.exception)), slog.String("reason", rerr.reason))
			d.mu.Lock()
			d.split[r.key()] = rerr.exception
			d.splitGen++
			d.mu.Unlock()
			for _, s := range splitRequest(r) {
				d.readRequest(ctx, p, s, out)
			}
			return
		}
		fill(out, r, rerr.q, rerr.reason)
		return
	}
	now := time.Now().UTC()
	p.lastMu.Lock()
	defer p.lastMu.Unlock()
	if p.last == nil && r.fc > 2 {
		p.last = make([]lastValue, len(p.points))
	}
	for _, it := range r.items {
		var v value.Value
		var err error
		if r.fc <= 2 {
			v, err = decodeBit(raw, it.start()-r.start)
		} else {
			b := raw[2*(it.start()-r.start):]
			key, keyed := registerKey(it.spec, b)
			if last := &p.last[it.idx]; keyed && last.v != nil && last.key == key {
				v = last.v
			} else if v, err = decodeRegisters(it.spec, b); err == nil && keyed {
				*last = lastValue{key: key, v: v}
			}
		}
		if err != nil {
			out[it.idx] = value.Bad(value.BadCommunicationError, err.Error(), now)
			continue
		}
		out[it.idx] = value.VQT{Value: v, Quality: value.Good, Time: now}
	}
}

func fill(out []value.VQT, r request, q value.Quality, reason string) {
	now := time.Now().UTC()
	for _, it := range r.items {
		out[it.idx] = value.Bad(q, reason, now)
	}
}

// demoted reports whether unit's breaker is open, with the reason text.
func (d *Driver) demoted(unit byte) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.units[unit]
	if u == nil || u.demotedUntil.IsZero() || !time.Now().Before(u.demotedUntil) {
		return "", false
	}
	return fmt.Sprintf("unit demoted after %d timeouts", d.cfg.Breaker.Timeouts), true
}

// note feeds a request's outcome to unit's breaker: a timeout (or exception
// 11, the gateway's "target device failed to respond") counts; an answer,
// even an exception, resets. A unit that reaches breaker.timeouts is demoted
// for breaker.backoff; after that one request probes it, and one more
// timeout demotes it again at once.
func (d *Driver) note(unit byte, rerr *reqError) {
	if rerr != nil && !rerr.timeout && rerr.exception == 0 {
		return // connection-level: says nothing about this unit
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.units[unit]
	if u == nil {
		u = &unitState{}
		d.units[unit] = u
	}
	if rerr == nil || !rerr.timeout {
		if !u.demotedUntil.IsZero() {
			d.log.Info("modbus: unit restored", slog.Int("unit", int(unit)))
		}
		u.timeouts, u.demotedUntil = 0, time.Time{}
		return
	}
	u.timeouts++
	if n := d.cfg.Breaker.Timeouts; n > 0 && u.timeouts >= n {
		if u.demotedUntil.IsZero() {
			d.log.Warn("modbus: unit demoted after consecutive timeouts", slog.Int("unit", int(unit)),
				slog.Int("timeouts", u.timeouts), slog.Duration("backoff", time.Duration(d.cfg.Breaker.Backoff)))
		}
		u.demotedUntil = time.Now().Add(time.Duration(d.cfg.Breaker.Backoff))
	}
}

// Write writes v to p once and never retries (docs/architecture.md, Rules from the field).
// v comes coerced to p's type (device.Coerce, the write path's one
// coercion); a value that does not conform is Bad_TypeMismatch, and a
// string the tag's encoding or length cannot hold Bad_OutOfRange. p is
// parsed once per configuration (a cache, as the read plans). Coils go out
// with FC5 (write_mode single) or FC15;
// a one-register value with FC6 in single mode, else FC16. A register bit is
// a read-modify-write of its register (FC3 then FC6/FC16): it is not atomic
// on the device, and a write to the same register by another master between
// the two requests is lost. Input registers and discrete inputs are
// Bad_NotWritable. A write that failed after its request was sent (a
// timeout, a dropped connection, a bad answer) is Uncertain: "write timed
// out; it may have been applied". Every error is a *device.QualityError.
func (d *Driver) Write(ctx context.Context, p device.Point, v value.Value) error {
	s, err := d.specs.Get(p, d.spec)
	if err != nil {
		return device.Errorf(value.BadConfigurationError, "%v", err)
	}
	if !s.addr.Table.Writable() {
		return device.Errorf(value.BadNotWritable, "%s is read-only (%s)", p.Address, tableName(s.addr.Table))
	}
	if !value.Conforms(s.typ, v) {
		return device.NotCoerced(p, v)
	}
	cv := v
	unit := d.unitOf(p)
	if reason, demoted := d.demoted(unit); demoted {
		return device.Errorf(value.BadNotConnected, "%s", reason)
	}
	single := d.cfg.WriteMode == WriteSingle
	off := s.addr.Offset
	var fn func(modbus.Client) ([]byte, error)
	switch {
	case s.addr.Table == Coil:
		state, bit := uint16(0x0000), byte(0)
		if cv.(bool) {
			state, bit = 0xFF00, 1
		}
		fn = func(c modbus.Client) ([]byte, error) {
			if single {
				return c.WriteSingleCoil(off, state)
			}
			return c.WriteMultipleCoils(off, 1, []byte{bit})
		}
	case s.addr.Bit >= 0:
		return d.writeBit(ctx, unit, s, cv.(bool), single)
	default:
		data, err := encodeRegisters(s, cv)
		if err != nil {
			return coerceError(p, err)
		}
		fn = registerWrite(off, data, single)
	}
	_, rerr := d.link.do(ctx, unit, false, nil, fn)
	d.note(unit, rerr)
	return writeError(rerr)
}

func registerWrite(off uint16, data []byte, single bool) func(modbus.Client) ([]byte, error) {
	return func(c modbus.Client) ([]byte, error) {
		if single && len(data) == 2 {
			return c.WriteSingleRegister(off, binary.BigEndian.Uint16(data))
		}
		return c.WriteMultipleRegisters(off, uint16(len(data)/2), data)
	}
}

// writeBit sets or clears one bit of a holding register by reading the
// register and writing it back (not atomic on the device; see Write).
func (d *Driver) writeBit(ctx context.Context, unit byte, s spec, on, single bool) error {
	d.rmw.Lock()
	defer d.rmw.Unlock()
	off := s.addr.Offset
	raw, rerr := d.link.do(ctx, unit, true, nil, func(c modbus.Client) ([]byte, error) {
		return c.ReadHoldingRegisters(off, 1)
	})
	d.note(unit, rerr)
	if rerr != nil {
		return device.Errorf(rerr.q, "read before bit write: %s", rerr.reason)
	}
	reg := binary.BigEndian.Uint16(raw)
	if on {
		reg |= 1 << uint(s.addr.Bit)
	} else {
		reg &^= 1 << uint(s.addr.Bit)
	}
	_, rerr = d.link.do(ctx, unit, false, nil, registerWrite(off, binary.BigEndian.AppendUint16(nil, reg), single))
	d.note(unit, rerr)
	return writeError(rerr)
}

// writeError turns a write's failure into a *device.QualityError: Uncertain
// when the request went out and no clean answer came back, else the quality
// of the failure.
func writeError(rerr *reqError) error {
	switch {
	case rerr == nil:
		return nil
	case rerr.sent && rerr.exception == 0 && rerr.q == value.BadTimeout:
		return device.Errorf(value.Uncertain, "write timed out; it may have been applied")
	case rerr.sent && rerr.exception == 0:
		return device.Errorf(value.Uncertain, "write failed after it was sent (%s); it may have been applied", rerr.reason)
	}
	return device.Errorf(rerr.q, "%s", rerr.reason)
}

func coerceError(p device.Point, err error) error {
	return device.Errorf(value.CoerceQuality(err), "%s (%s): %v", p.Address, p.Type, err)
}
