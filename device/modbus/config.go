package modbus

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"qubiq.dev/edge/device"
)

// Write modes (docs/project.md, Project file: write_mode).
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
// (docs/project.md, Project file), decoded strictly from JSON with snake_case keys.
// Start from DefaultConfig: keys absent from the JSON keep their default.
type Config struct {
	// URL names the transport and the device (required):
	//
	//   - "tcp://host:port": Modbus TCP (MBAP framing; port 502 when
	//     omitted);
	//   - "rtu:///dev/ttyUSB0": Modbus RTU on a serial port (the path after
	//     rtu://), with Baud, Parity, DataBits and StopBits;
	//   - "rtu+tcp://host:port": RTU frames over a TCP socket, as
	//     serial-to-Ethernet gateways carry them (port 502 when omitted).
	//
	// Devices whose url names the same serial port or the same rtu+tcp
	// endpoint share one bus: one request in flight on it at a time, in
	// the order they come (Modbus over Serial Line V1.02 §2.1: one master,
	// one transaction at a time).
	URL string `json:"url"`
	// Baud is the serial line's bit rate (default 9600). Baud, Parity,
	// DataBits and StopBits apply to rtu:// only and are checked only there.
	Baud int `json:"baud"`
	// Parity is "N", "E" or "O" (rtu:// only; default "E", the parity
	// Modbus over Serial Line V1.02 §2.5.1 requires by default; "N" should
	// go with 2 stop bits there, though many devices use 8N1).
	Parity string `json:"parity"`
	// DataBits is 8: RTU characters carry 8 data bits (Modbus over Serial
	// Line V1.02 §2.5.1).
	DataBits int `json:"data_bits"`
	// StopBits is 1 or 2 (rtu:// only; default 1).
	StopBits int `json:"stop_bits"`
	// UnitID is the unit identifier (0..255) of points without their own.
	// On RTU it is the slave address, 1..247: 0 is the broadcast address,
	// which no slave answers (Modbus over Serial Line V1.02 §2.2).
	UnitID int `json:"unit_id"`
	// Timeout bounds a connect, and each request from send to answer. A
	// request past it is Bad_Timeout and its connection is closed.
	Timeout device.Duration `json:"timeout"`
	// WriteMode is WriteSingle or WriteMultiple.
	WriteMode string `json:"write_mode"`
	// MaxGap is the widest run of unused registers (or bits) that a read may
	// bridge to merge two points into one request (0..125). A device that
	// answers exception 2 for a bridged gap makes the driver split the
	// request and remember it (docs/modbus.md, fault C07).
	MaxGap int `json:"max_gap"`
	// MaxRegistersPerRequest caps the quantity of one FC3/FC4 read (1..125).
	MaxRegistersPerRequest int `json:"max_registers_per_request"`
	// MinInterval is the least time between the start of two requests on the
	// connection (0: none), for devices that drop back-to-back requests.
	MinInterval device.Duration `json:"min_interval"`
	// Breaker demotes a unit that keeps timing out (docs/architecture.md, Rules from
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

// Serial line defaults (Modbus over Serial Line V1.02 §2.5.1: 9600 and 19200
// baud are required, 19200 the default of that spec; 9600 is what field
// devices ship with most and what docs/project.md's project file assumes).
const (
	DefaultBaud     = 9600
	DefaultParity   = "E"
	DefaultDataBits = 8
	DefaultStopBits = 1
)

// DefaultConfig holds the defaults of every key but url.
var DefaultConfig = Config{
	Baud:                   DefaultBaud,
	Parity:                 DefaultParity,
	DataBits:               DefaultDataBits,
	StopBits:               DefaultStopBits,
	UnitID:                 1,
	Timeout:                device.Duration(time.Second),
	WriteMode:              WriteMultiple,
	MaxGap:                 16,
	MaxRegistersPerRequest: MaxRegistersPerRequest,
	Breaker:                BreakerConfig{Timeouts: 3, Backoff: device.Duration(30 * time.Second)},
}

// configHints are the keys people write for a Modbus device by habit, with
// what to write instead.
var configHints = map[string]string{
	"host":     "use url: tcp://HOST:PORT (rtu:///dev/ttyX for a serial line)",
	"port":     "use url: tcp://HOST:PORT (rtu:///dev/ttyX for a serial line)",
	"ip":       "use url: tcp://HOST:PORT",
	"address":  "use url: tcp://HOST:PORT (a tag has the address)",
	"slave":    `did you mean "unit_id"?`,
	"slave_id": `did you mean "unit_id"?`,
	"unit":     `did you mean "unit_id"?`,
	"device":   "use url: rtu:///dev/ttyUSB0 for a serial line",
	"baudrate": `did you mean "baud"?`,
}

// ParseConfig strict-decodes raw over DefaultConfig; an unknown key is an
// error naming it. It does not validate: call Validate.
func ParseConfig(raw []byte) (Config, error) {
	c := DefaultConfig
	if err := device.DecodeStrict(raw, &c, configHints); err != nil {
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
	ep, err := c.endpoint()
	if err != nil {
		bad("url", "%v", err)
	}
	if c.UnitID < 0 || c.UnitID > 255 {
		bad("unit_id", "%d out of range 0..255", c.UnitID)
	} else if err == nil && ep.kind != kindTCP && (c.UnitID < 1 || c.UnitID > 247) {
		bad("unit_id", "%d out of range 1..247 on a serial line (0 is the broadcast address, which no slave answers)", c.UnitID)
	}
	if err == nil && ep.kind == kindRTU {
		if !serialBauds[c.Baud] {
			bad("baud", "%d is not a rate the serial port supports (%s)", c.Baud, bauds())
		}
		if c.Parity != "N" && c.Parity != "E" && c.Parity != "O" {
			bad("parity", "%q: want \"N\", \"E\" or \"O\"", c.Parity)
		}
		if c.DataBits != 8 {
			bad("data_bits", "%d: RTU needs 8 data bits (Modbus over Serial Line §2.5.1)", c.DataBits)
		}
		if c.StopBits != 1 && c.StopBits != 2 {
			bad("stop_bits", "%d: want 1 or 2", c.StopBits)
		}
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

// kind is a transport (the url's scheme).
type kind int

const (
	kindTCP        kind = iota // tcp://: Modbus TCP, MBAP framing
	kindRTU                    // rtu://: RTU framing on a serial port
	kindRTUOverTCP             // rtu+tcp://: RTU framing on a TCP socket
)

// endpoint is where the url points: the transport and its address (host:port,
// or the serial port's path).
type endpoint struct {
	kind kind
	addr string
}

// key names the bus: devices whose endpoints have the same key share it.
func (e endpoint) key() string {
	switch e.kind {
	case kindRTU:
		return "rtu://" + e.addr
	case kindRTUOverTCP:
		return "rtu+tcp://" + e.addr
	}
	return "tcp://" + e.addr
}

// endpoint parses the url (see Config.URL).
func (c Config) endpoint() (endpoint, error) {
	const forms = "tcp://host:port, rtu:///dev/ttyX or rtu+tcp://host:port"
	if c.URL == "" {
		return endpoint{}, fmt.Errorf("required (%s)", forms)
	}
	if !strings.Contains(c.URL, "://") && !strings.HasPrefix(c.URL, "rtu:") {
		// "10.0.0.5:502", "plc1" or "/dev/ttyUSB0": the address a Kepware or
		// Node-RED user types, without the scheme that says which framing.
		if strings.HasPrefix(c.URL, "/") {
			return endpoint{}, fmt.Errorf("%q: a serial port needs the rtu scheme: rtu://%s", c.URL, c.URL)
		}
		return endpoint{}, fmt.Errorf("%q: no scheme; for Modbus TCP write tcp://%s (also rtu+tcp://HOST:PORT for RTU framing over TCP)", c.URL, c.URL)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return endpoint{}, fmt.Errorf("%q: %w", c.URL, err)
	}
	switch u.Scheme {
	case "rtu":
		if u.Host != "" || u.Opaque != "" || !path.IsAbs(u.Path) || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return endpoint{}, fmt.Errorf("%q: want rtu:// and the serial port's absolute path, as rtu:///dev/ttyUSB0", c.URL)
		}
		return endpoint{kind: kindRTU, addr: path.Clean(u.Path)}, nil
	case "tcp", "rtu+tcp":
	default:
		return endpoint{}, fmt.Errorf("%q: scheme must be tcp, rtu or rtu+tcp (%s)", c.URL, forms)
	}
	if u.Hostname() == "" {
		return endpoint{}, fmt.Errorf("%q: no host", c.URL)
	}
	if dottedQuad.MatchString(u.Hostname()) && net.ParseIP(u.Hostname()) == nil {
		return endpoint{}, fmt.Errorf("%q: %s is not an IPv4 address (each of the four numbers is 0 to 255)", c.URL, u.Hostname())
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return endpoint{}, fmt.Errorf("%q: only %s://host:port is allowed", c.URL, u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = "502"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return endpoint{}, fmt.Errorf("%q: port %q out of range 1..65535", c.URL, port)
	}
	k := kindTCP
	if u.Scheme == "rtu+tcp" {
		k = kindRTUOverTCP
	}
	return endpoint{kind: k, addr: net.JoinHostPort(u.Hostname(), port)}, nil
}

// dottedQuad matches a host written as four dot-separated numbers, which
// is meant as an IPv4 address (a host name cannot end in a number label
// under RFC 1123 §2.1's reading used by resolvers).
var dottedQuad = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$`)

// serialBauds are the rates github.com/goburrow/serial v0.1.0 sets on Linux.
var serialBauds = map[int]bool{50: true, 75: true, 110: true, 134: true, 150: true, 200: true, 300: true,
	600: true, 1200: true, 1800: true, 2400: true, 4800: true, 9600: true, 19200: true, 38400: true,
	57600: true, 115200: true, 230400: true, 460800: true, 500000: true, 576000: true, 921600: true,
	1000000: true, 1152000: true, 1500000: true, 2000000: true, 2500000: true, 3000000: true,
	3500000: true, 4000000: true}

func bauds() string {
	var rates []int
	for r := range serialBauds {
		rates = append(rates, r)
	}
	sort.Ints(rates)
	var b strings.Builder
	for i, r := range rates {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
	}
	return b.String()
}
