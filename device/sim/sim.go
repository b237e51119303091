// Package sim is the built-in simulator driver of QUBIQ Edge, registered as
// "sim" (device.Register from init; device/all imports it). It needs no
// equipment: its addresses are signal generators and a writable memory
// (docs/simulator.md, Tags and addresses):
//
//	ramp(lo,hi,period)   linear from lo to hi over period, then wraps to lo
//	sine(lo,hi,period)   sine between lo and hi with the given period
//	random(lo,hi)        uniform random in [lo, hi)
//	memory               the last value written to the tag path (initially
//	                     the zero of the tag's type: false, 0, "")
//
// period is a Go duration ("10s", "500ms"). Generators start at New. Values
// are coerced to the point's type (integers rounded, bool true above the
// middle of lo..hi, string the number's text). Only memory is writable.
//
// It imports device and value only; no other project package, and no other
// driver, imports it.
package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

func init() { device.Register("sim", New) }

// Interface guards.
var (
	_ device.Driver         = (*Driver)(nil)
	_ device.Restorer       = (*Driver)(nil)
	_ device.WriteChecker   = (*Driver)(nil)
	_ device.Stater         = (*Driver)(nil)
	_ device.AddressChecker = (*Driver)(nil)
)

// Config is the simulator's device config: it has no keys, and any key is an
// error naming it.
type Config struct{}

// Driver is a simulated device. Its methods are safe for concurrent use.
type Driver struct {
	name  string
	log   *slog.Logger
	start time.Time
	now   func() time.Time

	mu     sync.Mutex
	mem    map[string]value.Value // memory values by tag path
	closed bool

	points device.ParseCache[gen] // parsed addresses, once per configuration
}

// New is the device.Factory of driver "sim". cfg.Raw must be empty or {}.
func New(cfg device.Config) (device.Driver, error) {
	var c Config
	if err := device.DecodeStrict(cfg.Raw, &c); err != nil {
		return nil, fmt.Errorf("device %q: sim config: %w", cfg.Name, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{name: cfg.Name, log: log, start: time.Now(), now: time.Now, mem: map[string]value.Value{}}, nil
}

// Validate always succeeds: the simulator has no config.
func (d *Driver) Validate() error { return nil }

// CheckPoint parses p's address and checks that its generator's range fits
// p's type; the error names the address text.
func (d *Driver) CheckPoint(p device.Point) error {
	_, err := parsePoint(p)
	return err
}

// CheckAddress parses an address alone, without its type
// (device.AddressChecker); the error names the address text.
func (d *Driver) CheckAddress(address string) error {
	if _, err := parseAddress(address); err != nil {
		return fmt.Errorf("sim address %q: %w", address, err)
	}
	return nil
}

// Open does nothing: the simulator is always there.
func (d *Driver) Open(ctx context.Context) error { return nil }

// Close marks the driver closed; later reads are Bad_NotConnected. Safe to
// call twice.
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// State reports "connected", or "disconnected" after Close.
func (d *Driver) State() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return "disconnected", "closed"
	}
	return "connected", ""
}

// Read returns one VQT per point: Good with the generator's (or memory's)
// value at the current time (UTC), Bad_ConfigurationError for an address
// that does not parse, Bad_NotConnected after Close.
func (d *Driver) Read(ctx context.Context, points []device.Point) []value.VQT {
	now := d.now().UTC()
	out := make([]value.VQT, len(points))
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	for i, p := range points {
		if closed {
			out[i] = value.Bad(value.BadNotConnected, "driver closed", now)
			continue
		}
		g, err := d.points.Get(p, parsePoint)
		if err != nil {
			out[i] = value.Bad(value.BadConfigurationError, err.Error(), now)
			continue
		}
		var v value.Value
		if g.kind == memory {
			d.mu.Lock()
			v, err = d.memoryValue(p)
			d.mu.Unlock()
		} else {
			v, err = coerce(p.Type, g.at(now.Sub(d.start)), g)
		}
		if err != nil {
			out[i] = value.Bad(value.CoerceQuality(err), err.Error(), now)
			continue
		}
		out[i] = value.VQT{Value: v, Quality: value.Good, Time: now}
	}
	return out
}

// memoryValue returns the stored value of p coerced to its type, or the zero
// of its type. The caller holds d.mu.
func (d *Driver) memoryValue(p device.Point) (value.Value, error) {
	v, ok := d.mem[p.Tag]
	if !ok {
		return zero(p.Type), nil
	}
	return value.Coerce(p.Type, v)
}

// Write stores v for a memory point. v comes coerced to the point's type
// (device.Coerce, the write path's one coercion); a value that does not
// conform is Bad_TypeMismatch. Generator addresses are Bad_NotWritable.
// Errors are *device.QualityError.
func (d *Driver) Write(ctx context.Context, p device.Point, v value.Value) error {
	g, err := d.points.Get(p, parsePoint)
	if err != nil {
		return device.Errorf(value.BadConfigurationError, "%v", err)
	}
	if g.kind != memory {
		return device.Errorf(value.BadNotWritable, "sim address %q is read-only (only memory is writable)", p.Address)
	}
	if !value.Conforms(p.Type, v) {
		return device.NotCoerced(p, v)
	}
	cv := v
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return device.Errorf(value.BadNotConnected, "driver closed")
	}
	d.mem[p.Tag] = cv
	return nil
}

// Restore puts back the value a memory point held before a restart
// (device.Restorer); generator points take nothing.
func (d *Driver) Restore(p device.Point, v value.Value) bool {
	g, err := parsePoint(p)
	if err != nil || g.kind != memory {
		return false
	}
	cv, err := value.Coerce(p.Type, v)
	if err != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mem[p.Tag] = cv
	return true
}

// Writable reports whether p is a memory point, the only writable kind
// (device.WriteChecker).
func (d *Driver) Writable(p device.Point) bool {
	g, err := parsePoint(p)
	return err == nil && g.kind == memory
}

type kind uint8

const (
	memory kind = iota + 1
	ramp
	sine
	random
)

// gen is a parsed sim address.
type gen struct {
	kind   kind
	lo, hi float64
	period time.Duration
}

// at returns the generator's value after elapsed.
func (g gen) at(elapsed time.Duration) float64 {
	switch g.kind {
	case ramp:
		frac := math.Mod(float64(elapsed), float64(g.period)) / float64(g.period)
		return g.lo + (g.hi-g.lo)*frac
	case sine:
		mid, amp := (g.lo+g.hi)/2, (g.hi-g.lo)/2
		return mid + amp*math.Sin(2*math.Pi*float64(elapsed)/float64(g.period))
	case random:
		return g.lo + (g.hi-g.lo)*rand.Float64()
	}
	return 0
}

// parsePoint parses p's address and checks it against p's type.
func parsePoint(p device.Point) (gen, error) {
	g, err := parseAddress(p.Address)
	if err != nil {
		return g, fmt.Errorf("sim address %q: %w", p.Address, err)
	}
	switch p.Type {
	case value.TypeUnknown, value.Auto:
		return g, fmt.Errorf("sim address %q: type %s is not supported (want bool, int16..uint64, float32, float64 or string)", p.Address, p.Type)
	}
	if p.Encoding != "" || p.StringByteOrder != "" {
		return g, fmt.Errorf("sim address %q: encoding and string_byte_order apply to Modbus register strings only", p.Address)
	}
	if g.kind != memory {
		for _, x := range []float64{g.lo, g.hi} {
			if _, err := coerce(p.Type, x, g); err != nil {
				return g, fmt.Errorf("sim address %q: range does not fit %s: %w", p.Address, p.Type, err)
			}
		}
	}
	return g, nil
}

func parseAddress(s string) (gen, error) {
	s = strings.TrimSpace(s)
	if s == "memory" {
		return gen{kind: memory}, nil
	}
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp != len(s)-1 || rp < lp {
		return gen{}, errors.New("want ramp(lo,hi,period), sine(lo,hi,period), random(lo,hi) or memory")
	}
	name, args := strings.TrimSpace(s[:lp]), strings.Split(s[lp+1:rp], ",")
	var g gen
	want := 3
	switch name {
	case "ramp":
		g.kind = ramp
	case "sine":
		g.kind = sine
	case "random":
		g.kind, want = random, 2
	default:
		return g, fmt.Errorf("unknown generator %q (want ramp, sine, random or memory)", name)
	}
	if len(args) != want {
		return g, fmt.Errorf("%s takes %d arguments, got %d", name, want, len(args))
	}
	var err error
	if g.lo, err = parseNumber(args[0]); err != nil {
		return g, fmt.Errorf("lo: %w", err)
	}
	if g.hi, err = parseNumber(args[1]); err != nil {
		return g, fmt.Errorf("hi: %w", err)
	}
	if g.lo > g.hi {
		return g, fmt.Errorf("lo %v is above hi %v", g.lo, g.hi)
	}
	if math.IsInf(g.hi-g.lo, 0) {
		// The generators compute lo + (hi-lo)×frac: a width beyond float64
		// would make them send ±Inf and NaN.
		return g, fmt.Errorf("the range %v..%v is wider than a float64 holds", g.lo, g.hi)
	}
	if want == 3 {
		if g.period, err = time.ParseDuration(strings.TrimSpace(args[2])); err != nil {
			return g, fmt.Errorf("period: %w", err)
		}
		if g.period <= 0 {
			return g, fmt.Errorf("period %s must be > 0", g.period)
		}
	}
	return g, nil
}

func parseNumber(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a finite number", strings.TrimSpace(s))
	}
	return f, nil
}

// coerce turns generator output x into type t: integers are rounded, a bool
// is true above the middle of lo..hi, a string is the number's text.
func coerce(t value.Type, x float64, g gen) (value.Value, error) {
	switch t {
	case value.Bool:
		return x > (g.lo+g.hi)/2, nil
	case value.String:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case value.Int16, value.Uint16, value.Int32, value.Uint32, value.Int64, value.Uint64:
		x = math.Round(x)
	}
	return value.Coerce(t, x)
}

// zero is the initial value of a memory point of type t.
func zero(t value.Type) value.Value {
	switch t {
	case value.Bool:
		return false
	case value.Int16, value.Int32, value.Int64:
		return int64(0)
	case value.Uint16, value.Uint32, value.Uint64:
		return uint64(0)
	case value.Float32, value.Float64:
		return float64(0)
	case value.String:
		return ""
	}
	return nil
}
