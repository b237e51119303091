// Package device defines how QUBIQ Edge talks to equipment: the Driver
// interface every protocol implements, its optional extras, the registry of
// drivers by name, and the typed errors a driver returns.
//
// Drivers live in sub-packages (device/modbus, device/opcua, device/sim) and
// register themselves from init(); device/all imports them all and only
// cmd/qubiqd (and tests) import device/all. This package imports value only;
// tagengine imports it, never the reverse.
package device

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/value"
)

// Point is one tag as a driver sees it: the tag path (for errors and logs),
// the address text of the project file, the value type, the byte order for
// multi-register types ("ABCD" when empty), the unit id override and the
// string options of register strings. Point is comparable: drivers key their
// parse caches and request plans by it.
type Point struct {
	Tag       string
	Address   string
	Type      value.Type
	ByteOrder string
	// UnitID overrides the device's unit id when it is not 0, or when
	// HasUnitID is set: unit 0 is a unit of its own (a Modbus TCP gateway's
	// own unit, Modbus Messaging on TCP/IP V1.0b §4.4.2), so a tag's
	// unit_id: 0 sets HasUnitID and is never mistaken for "absent".
	UnitID    int
	HasUnitID bool
	// StringByteOrder is the order of the two characters in each register
	// of a register string: "high" (high byte first, the default and the
	// Modbus convention) or "low".
	StringByteOrder string
	// Encoding is the character encoding of a register string: "ascii",
	// "latin1" or "utf8" (the default).
	Encoding string
}

// Unit returns the point's unit id override and whether it has one.
func (p Point) Unit() (int, bool) { return p.UnitID, p.HasUnitID || p.UnitID != 0 }

// Driver is one connection to one device. Its life cycle:
//
//  1. New, through the Factory registered for its driver name, which
//     strict-decodes the device's config (unknown keys are an error naming
//     the key).
//  2. Validate, pure and fast: the config alone.
//  3. CheckPoint for every tag on the device: the address and type are
//     parsed; an error names the address text.
//  4. Open(ctx): start connecting. A driver whose device is away still opens;
//     it reconnects on its own (capped exponential backoff with jitter) and
//     reports the outage as quality.
//  5. Read and Write, any number of times, from several goroutines.
//  6. Close(ctx), safe after a partial Open and safe to call twice.
//
// Read returns one VQT per point, in order. A point that failed carries a bad
// quality and a reason (quality is data, not an error). Write takes a value
// already coerced to the point's type (Coerce; the tag engine's write path
// coerces once, drivers do not coerce again: a value that does not conform,
// value.Conforms, is Bad_TypeMismatch). It returns nil when the device
// acknowledged the write, or an error; a *QualityError says which quality the
// caller reports (a write that timed out after it was sent is
// value.Uncertain and is never retried).
type Driver interface {
	Validate() error
	CheckPoint(p Point) error
	Open(ctx context.Context) error
	Read(ctx context.Context, points []Point) []value.VQT
	Write(ctx context.Context, p Point, v value.Value) error
	Close(ctx context.Context) error
}

// Stater is implemented by drivers that report their connection state for
// health ("connected", "connecting", "disconnected") and a reason.
type Stater interface {
	State() (state, reason string)
}

// IntoReader is implemented by drivers that read into a slice the caller
// provides: ReadInto is Read with out (len(points) long) as the result,
// every element written; the caller may reuse out once it returned. The
// tag engine's scans use it so that a scan allocates no result slice.
// points must not be modified after the call: a driver may keep the slice
// itself (not a copy) as the key of what it prepared for those points
// (the Modbus driver's read plans), and know it again by its address
// (the engine passes each scan class's own slice, which never changes).
type IntoReader interface {
	ReadInto(ctx context.Context, points []Point, out []value.VQT)
}

// Subscriber is implemented by drivers that push changes (OPC UA monitored
// items). Subscribe delivers each change to fn until ctx ends.
type Subscriber interface {
	Subscribe(ctx context.Context, points []Point, fn func(i int, v value.VQT)) error
}

// IntervalSubscriber is a Subscriber that takes the sampling and publishing
// interval of the subscription (the tags' scan class; OPC UA Part 4 §5.12.1.2
// and §5.13.1.2).
type IntervalSubscriber interface {
	SubscribeInterval(ctx context.Context, interval time.Duration, points []Point, fn func(i int, v value.VQT)) error
}

// Browser is implemented by drivers whose device has an address space to
// browse (OPC UA).
type Browser interface {
	Browse(ctx context.Context, node string) ([]BrowseResult, error)
}

// BrowseResult is one child node found by Browse.
type BrowseResult struct {
	NodeID     string `json:"node_id"`
	BrowseName string `json:"browse_name"`
	NodeClass  string `json:"node_class"`
	DataType   string `json:"data_type,omitempty"`
	Writable   bool   `json:"writable"`
}

// Config is what a Factory gets: the device name, its driver-specific keys as
// JSON (strict-decode them with DecodeStrict) and the logger to use.
type Config struct {
	Name   string
	Raw    json.RawMessage
	Logger *slog.Logger
}

// Factory builds a driver from its config.
type Factory func(cfg Config) (Driver, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes a driver available under name. It panics when name is
// registered twice: that is a programming error found at start-up.
func Register(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("device: driver registered twice: " + name)
	}
	registry[name] = f
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Drivers lists the registered driver names, sorted.
func Drivers() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DecodeStrict decodes raw into v and fails on keys v does not have (docs/architecture.md
// §2: unknown fields are an error). The error is a *KeyError naming the key
// in words, with the valid keys and a suggestion (hints maps a key people
// write by habit, such as "host", to what to write instead), or the value
// of the wrong kind and what the key takes.
func DecodeStrict(raw json.RawMessage, v any, hints ...map[string]string) error {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var h map[string]string
	if len(hints) > 0 {
		h = hints[0]
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		key = strings.Trim(key, `"`)
		valid := jsonKeys(reflect.TypeOf(v))
		msg := fmt.Sprintf("unknown key %q (valid keys: %s)", key, strings.Join(valid, ", "))
		if s := SuggestKey(key, valid, h); s != "" {
			msg += "; " + s
		}
		return &KeyError{Key: key, Msg: msg}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &KeyError{Key: te.Field, Msg: fmt.Sprintf("key %q: want %s, got %s", te.Field, jsonKind(te.Type), jsonValue(te.Value))}
	}
	return err
}

// KeyError is a refused key of a driver's config: Key is its name (a
// dotted path for nested keys, "breaker.timeouts"), Msg says what is wrong
// in words. config.DeviceConfig.LineOf maps it to the key's line.
type KeyError struct {
	Key string
	Msg string
}

// Error returns Msg; LineOf adds the file and line.
func (e *KeyError) Error() string { return e.Msg }

func jsonKeys(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if n := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]; n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}

func jsonKind(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return "a duration such as 1s or 500ms"
	}
	switch t.Kind() {
	case reflect.String:
		return "text"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a mapping"
}

func jsonValue(v string) string {
	switch v {
	case "string":
		return "text"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	}
	if strings.HasPrefix(v, "number ") {
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return v
}

// QualityError is an error that carries the quality the caller reports, with
// the reason as text.
type QualityError struct {
	Quality value.Quality
	Reason  string
}

// Error returns "<quality>: <reason>".
func (e *QualityError) Error() string { return e.Quality.String() + ": " + e.Reason }

// Errorf returns a *QualityError with quality q and a formatted reason.
func Errorf(q value.Quality, format string, args ...any) error {
	return &QualityError{Quality: q, Reason: fmt.Sprintf(format, args...)}
}

// QualityOf maps err to the quality a caller reports: the quality of a
// *QualityError anywhere in the chain, value.BadTimeout for
// context.DeadlineExceeded, else value.BadCommunicationError. The second
// result is the reason text.
func QualityOf(err error) (value.Quality, string) {
	var qe *QualityError
	if errors.As(err, &qe) {
		return qe.Quality, qe.Reason
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return value.BadTimeout, "timeout"
	}
	return value.BadCommunicationError, err.Error()
}

// Coerce is the one coercion of the write path: v converted to p's type
// by value.Coerce (an array, for OPC UA array nodes, element by element),
// or a *QualityError whose quality is value.CoerceQuality of the refusal
// (Bad_OutOfRange or Bad_TypeMismatch) and whose reason is the refusal's
// text. Driver.Write gets its result; a driver whose points hold no arrays
// refuses one as not conforming (value.Conforms).
func Coerce(p Point, v value.Value) (value.Value, error) {
	cv, err := coerce(p.Type, value.Normalize(v))
	if err != nil {
		return nil, &QualityError{Quality: value.CoerceQuality(err), Reason: err.Error()}
	}
	return cv, nil
}

func coerce(t value.Type, v value.Value) (value.Value, error) {
	arr, ok := v.([]any)
	if !ok || t == value.Auto {
		return value.Coerce(t, v)
	}
	out := make([]any, len(arr))
	for i, e := range arr {
		c, err := value.Coerce(t, e)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

// NotCoerced is the error a driver returns from Write for a value that
// does not conform to p's type (value.Conforms): the caller skipped
// Coerce. Bad_TypeMismatch, naming the value's Go type and the tag's type.
func NotCoerced(p Point, v value.Value) error {
	return Errorf(value.BadTypeMismatch, "%s (%s): value %v of Go type %T was not coerced to the tag's type", p.Address, p.Type, v, v)
}

// ParseCache remembers what a driver parsed from each Point (address, type,
// byte order, unit id) so that the write path parses a point once per
// configuration, as the read path's request plans do: a driver is built
// anew for every configuration, and its cache with it. Errors are
// remembered too. The zero ParseCache is ready; it is safe for concurrent
// use and holds one entry per distinct point (the configured tags).
type ParseCache[T any] struct {
	m sync.Map // Point → parsed[T]
}

type parsed[T any] struct {
	v   T
	err error
}

// Get returns parse(p), calling parse only the first time p is seen.
func (c *ParseCache[T]) Get(p Point, parse func(Point) (T, error)) (T, error) {
	if e, ok := c.m.Load(p); ok {
		r := e.(parsed[T])
		return r.v, r.err
	}
	v, err := parse(p)
	c.m.Store(p, parsed[T]{v, err})
	return v, err
}

// Duration is a time.Duration that decodes from JSON as a Go duration string
// ("1s", "250ms") or a number of seconds.
type Duration time.Duration

// UnmarshalJSON accepts "1s" or 1.5 (seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("bad duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("bad duration %s (want text such as \"1s\" or \"500ms\", or a number of seconds)", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON encodes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Planner is implemented by drivers that merge points into requests (Modbus
// request planning). Plan returns the requests one Read of points sends, in
// order, without sending anything; the API shows it (GET
// /api/v1/devices/{name}/plan).
type Planner interface {
	Plan(points []Point) []PlannedRequest
}

// PlannedRequest is one request of a plan: the function code (Modbus
// Application Protocol v1.1b3 §6), the unit id, the first PDU address, the
// quantity (registers or bits), and the tags it serves.
type PlannedRequest struct {
	Function int      `json:"function_code"`
	Unit     int      `json:"unit_id"`
	Start    int      `json:"start"`
	Count    int      `json:"count"`
	Tags     []string `json:"tags"`
}

// Restorer is implemented by drivers that hold values themselves (the
// simulator's memory addresses): after a restart the engine hands them the
// last values read back from the store, so a setpoint written before the
// restart is not lost. Restore reports whether p took v.
type Restorer interface {
	Restore(p Point, v value.Value) bool
}

// WriteChecker is implemented by drivers that know from the address alone
// that a point can never be written (a Modbus input register, a simulator
// generator). The engine marks such tags read-only.
type WriteChecker interface {
	Writable(p Point) bool
}

// AddressChecker is implemented by drivers that can check an address
// without its type (a tag file whose type column is wrong still gets its
// address checked in the same pass). The error names the address text.
type AddressChecker interface {
	CheckAddress(address string) error
}
