package modbus

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"qubiq.dev/edge/device"
)

// Write modes (DESIGN.md, Project file: write_mode).
const (
	// WriteSingle writes one register with FC6 and one coil with FC5; values
	// of several registers still go out with FC16.
	WriteSingle = "single"
	// WriteMultiple writes with FC16 and FC15 always.
	WriteMultiple = "multiple"
)

// Limits of a request (Modbus Application Protocol V1.1b3 §6.1-§6.4).
const (
	MaxRegistersPerRequest = 125  // FC3/FC4 quantity
	MaxBitsPerRequest      = 2000 // FC1/FC2 quantity
)

// Config is the driver-specific part of a modbus device in the project file
// (DESIGN.md, Project file), decoded strictly from JSON with snake_case keys.
// Start from DefaultConfig: keys absent from the JSON keep their default.
type Config struct {
	// URL is "tcp://host:port" (port 502 when omitted). Required.
	URL string `json:"url"`
	// UnitID is the unit identifier (0..255) of points without their own.
	UnitID int `json:"unit_id"`
	// Timeout bounds a connect, and each request from send to answer. A
	// request past it is Bad_Timeout and its connection is closed.
	Timeout device.Duration `json:"timeout"`
	// WriteMode is WriteSingle or WriteMultiple.
	WriteMode string `json:"write_mode"`
	// MaxGap is the widest run of unused registers (or bits) that a read may
	// bridge to merge two points into one request (0..125). A device that
	// answers exception 2 for a bridged gap makes the driver split the
	// request and remember it (cases/modbus.md C07).
	MaxGap int `json:"max_gap"`
	// MaxRegistersPerRequest caps the quantity of one FC3/FC4 read (1..125).
	MaxRegistersPerRequest int `json:"max_registers_per_request"`
	// MinInterval is the least time between the start of two requests on the
	// connection (0: none), for devices that drop back-to-back requests.
	MinInterval device.Duration `json:"min_interval"`
	// Breaker demotes a unit that keeps timing out (DESIGN.md, Hard-won
	// rules: one dead unit never blinds the others).
	Breaker BreakerConfig `json:"breaker"`
}

// BreakerConfig is the per-unit circuit breaker: after Timeouts consecutive
// timeouts on one unit, its points read Bad_NotConnected ("unit demoted after
// N timeouts") for Backoff; then one request probes the unit, and a success
// restores it. Timeouts 0 turns the breaker off.
type BreakerConfig struct {
	Timeouts int             `json:"timeouts"`
	Backoff  device.Duration `json:"backoff"`
}

// DefaultConfig holds the defaults of every key but url.
var DefaultConfig = Config{
	UnitID:                 1,
	Timeout:                device.Duration(time.Second),
	WriteMode:              WriteMultiple,
	MaxGap:                 16,
	MaxRegistersPerRequest: MaxRegistersPerRequest,
	Breaker:                BreakerConfig{Timeouts: 3, Backoff: device.Duration(30 * time.Second)},
}

// ParseConfig strict-decodes raw over DefaultConfig; an unknown key is an
// error naming it. It does not validate: call Validate.
func ParseConfig(raw []byte) (Config, error) {
	c := DefaultConfig
	if err := device.DecodeStrict(raw, &c); err != nil {
		return c, fmt.Errorf("modbus config: %w", err)
	}
	return c, nil
}

// Validate checks every key and returns all the problems at once, each naming
// its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("modbus config: %s: "+format, append([]any{key}, args...)...))
	}
	if _, err := c.dialAddress(); err != nil {
		bad("url", "%v", err)
	}
	if c.UnitID < 0 || c.UnitID > 255 {
		bad("unit_id", "%d out of range 0..255", c.UnitID)
	}
	if c.Timeout <= 0 {
		bad("timeout", "must be > 0, got %s", time.Duration(c.Timeout))
	}
	if c.WriteMode != WriteSingle && c.WriteMode != WriteMultiple {
		bad("write_mode", "%q: want %q or %q", c.WriteMode, WriteSingle, WriteMultiple)
	}
	if c.MaxGap < 0 || c.MaxGap > MaxRegistersPerRequest {
		bad("max_gap", "%d out of range 0..%d", c.MaxGap, MaxRegistersPerRequest)
	}
	if c.MaxRegistersPerRequest < 1 || c.MaxRegistersPerRequest > MaxRegistersPerRequest {
		bad("max_registers_per_request", "%d out of range 1..%d", c.MaxRegistersPerRequest, MaxRegistersPerRequest)
	}
	if c.MinInterval < 0 {
		bad("min_interval", "must be >= 0, got %s", time.Duration(c.MinInterval))
	}
	if c.Breaker.Timeouts < 0 {
		bad("breaker.timeouts", "must be >= 0 (0 turns the breaker off), got %d", c.Breaker.Timeouts)
	}
	if c.Breaker.Timeouts > 0 && c.Breaker.Backoff <= 0 {
		bad("breaker.backoff", "must be > 0, got %s", time.Duration(c.Breaker.Backoff))
	}
	return errors.Join(errs...)
}

// dialAddress returns "host:port" from the url.
func (c Config) dialAddress() (string, error) {
	if c.URL == "" {
		return "", errors.New("required (tcp://host:port)")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return "", fmt.Errorf("%q: %w", c.URL, err)
	}
	if u.Scheme != "tcp" {
		return "", fmt.Errorf("%q: scheme must be tcp (tcp://host:port)", c.URL)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%q: no host", c.URL)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("%q: only tcp://host:port is allowed", c.URL)
	}
	port := u.Port()
	if port == "" {
		port = "502"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%q: port %q out of range 1..65535", c.URL, port)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
