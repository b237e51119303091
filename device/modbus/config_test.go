package modbus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/device"
)

func TestParseConfig_Defaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"url": "tcp://10.0.0.5:502"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig
	want.URL = "tcp://10.0.0.5:502"
	if c != want {
		t.Errorf("ParseConfig = %+v, want %+v", c, want)
	}
	if c.UnitID != 1 || time.Duration(c.Timeout) != time.Second || c.WriteMode != "multiple" || c.MaxGap != 16 ||
		c.MaxRegistersPerRequest != 125 || c.MinInterval != 0 || c.Breaker.Timeouts != 3 || time.Duration(c.Breaker.Backoff) != 30*time.Second {
		t.Errorf("defaults differ from docs/project.md's project file: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseConfig_AllKeys(t *testing.T) {
	raw := `{"url": "tcp://plc:1502", "unit_id": 0, "timeout": "250ms", "write_mode": "single", "max_gap": 0,
		"max_registers_per_request": 60, "min_interval": "20ms", "breaker": {"timeouts": 5, "backoff": 2}}`
	c, err := ParseConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{URL: "tcp://plc:1502", Baud: 9600, Parity: "E", DataBits: 8, StopBits: 1, UnitID: 0, Timeout: device.Duration(250 * time.Millisecond), WriteMode: WriteSingle,
		MaxGap: 0, MaxRegistersPerRequest: 60, MinInterval: device.Duration(20 * time.Millisecond),
		Breaker: BreakerConfig{Timeouts: 5, Backoff: device.Duration(2 * time.Second)}}
	if c != want {
		t.Errorf("ParseConfig = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseConfig_SerialKeys(t *testing.T) {
	tests := []struct {
		raw  string
		want endpoint
		line string
		t35  time.Duration
	}{
		// Defaults: 9600 8E1 (Modbus over Serial Line §2.5.1), 11-bit characters, t3.5 = 3.5*11/9600 s.
		{`{"url": "rtu:///dev/ttyUSB0"}`, endpoint{kindRTU, "/dev/ttyUSB0"}, "9600 8E1", 4010416 * time.Nanosecond},
		{`{"url": "rtu:///dev/ttyS1", "baud": 19200, "parity": "N", "data_bits": 8, "stop_bits": 2}`,
			endpoint{kindRTU, "/dev/ttyS1"}, "19200 8N2", 2005208 * time.Nanosecond},
		{`{"url": "rtu:///dev/../dev/ttyS1", "baud": 115200, "parity": "O"}`, endpoint{kindRTU, "/dev/ttyS1"}, "115200 8O1", 1750 * time.Microsecond},
		{`{"url": "rtu+tcp://gw.local:4001", "unit_id": 247}`, endpoint{kindRTUOverTCP, "gw.local:4001"}, "9600 8E1", 0},
		{`{"url": "rtu+tcp://gw.local"}`, endpoint{kindRTUOverTCP, "gw.local:502"}, "9600 8E1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			ep, err := c.endpoint()
			if err != nil || ep != tt.want {
				t.Errorf("endpoint = %+v, %v; want %+v", ep, err, tt.want)
			}
			if got := lineString(c); got != tt.line {
				t.Errorf("line = %s, want %s", got, tt.line)
			}
			b, err := acquireBus(ep, c)
			if err != nil {
				t.Fatal(err)
			}
			defer b.release()
			if d := b.t35 - tt.t35; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("t3.5 = %s, want %s", b.t35, tt.t35)
			}
		})
	}
}

func TestParseConfig_UnknownKey(t *testing.T) {
	for _, raw := range []string{`{"url": "tcp://a:502", "unitid": 1}`, `{"breaker": {"timeout": 3}}`} {
		_, err := ParseConfig([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("ParseConfig(%s) = %v, want an unknown key error", raw, err)
		}
	}
	// A wrong key suggests the right one; host and port say to use url.
	for raw, want := range map[string]string{
		`{"url": "tcp://a:502", "unitid": 1}`: `did you mean "unit_id"?`,
		`{"host": "10.0.0.5", "port": 502}`:   "use url: tcp://HOST:PORT",
		`{"max_gap": "wide"}`:                 `key "max_gap": want a whole number, got text`,
	} {
		_, err := ParseConfig([]byte(raw))
		var ke *device.KeyError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &ke) {
			t.Errorf("ParseConfig(%s) = %v, want a *device.KeyError containing %q", raw, err, want)
		}
	}
	if _, err := New(device.Config{Name: "plc1", Raw: []byte(`{"bogus": 1}`)}); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("New with an unknown key = %v, want an error naming the key", err)
	}
}

func TestConfig_Validate_Errors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no url", func(c *Config) { c.URL = "" }, "url: required"},
		{"bad scheme", func(c *Config) { c.URL = "udp://a:502" }, "scheme must be tcp, rtu or rtu+tcp"},
		{"no host", func(c *Config) { c.URL = "tcp://:502" }, "no host"},
		{"no scheme", func(c *Config) { c.URL = "192.168.1.21:502" }, `"192.168.1.21:502": no scheme; for Modbus TCP write tcp://192.168.1.21:502`},
		{"host name without scheme", func(c *Config) { c.URL = "plc1:502" }, "write tcp://plc1:502"},
		{"serial port without scheme", func(c *Config) { c.URL = "/dev/ttyUSB0" }, "needs the rtu scheme: rtu:///dev/ttyUSB0"},
		{"octet above 255", func(c *Config) { c.URL = "tcp://192.168.1.300:502" }, "192.168.1.300 is not an IPv4 address"},
		{"bad port", func(c *Config) { c.URL = "tcp://a:70000" }, "port"},
		{"path", func(c *Config) { c.URL = "tcp://a:502/x" }, "only tcp://host:port"},
		{"rtu+tcp path", func(c *Config) { c.URL = "rtu+tcp://a:502/x" }, "only rtu+tcp://host:port"},
		{"rtu with host", func(c *Config) { c.URL = "rtu://host/dev/ttyUSB0" }, "serial port's absolute path"},
		{"rtu relative", func(c *Config) { c.URL = "rtu:dev/ttyUSB0" }, "serial port's absolute path"},
		{"rtu no path", func(c *Config) { c.URL = "rtu://" }, "serial port's absolute path"},
		{"rtu query", func(c *Config) { c.URL = "rtu:///dev/ttyUSB0?baud=9600" }, "serial port's absolute path"},
		{"rtu broadcast unit", func(c *Config) { c.URL, c.UnitID = "rtu:///dev/ttyUSB0", 0 }, "unit_id: 0 out of range 1..247 on a serial line"},
		{"rtu unit 248", func(c *Config) { c.URL, c.UnitID = "rtu+tcp://gw:4001", 248 }, "unit_id: 248 out of range 1..247"},
		{"baud", func(c *Config) { c.URL, c.Baud = "rtu:///dev/ttyS0", 9601 }, "baud: 9601 is not a rate"},
		{"parity", func(c *Config) { c.URL, c.Parity = "rtu:///dev/ttyS0", "even" }, `parity: "even": want "N", "E" or "O"`},
		{"data bits", func(c *Config) { c.URL, c.DataBits = "rtu:///dev/ttyS0", 7 }, "data_bits: 7: RTU needs 8 data bits"},
		{"stop bits", func(c *Config) { c.URL, c.StopBits = "rtu:///dev/ttyS0", 3 }, "stop_bits: 3: want 1 or 2"},
		{"unit id", func(c *Config) { c.UnitID = 256 }, "unit_id: 256 out of range"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "timeout: must be > 0"},
		{"write mode", func(c *Config) { c.WriteMode = "both" }, `write_mode: "both"`},
		{"max gap", func(c *Config) { c.MaxGap = -1 }, "max_gap"},
		{"max registers 0", func(c *Config) { c.MaxRegistersPerRequest = 0 }, "max_registers_per_request: 0 out of range 1..125"},
		{"max registers 126", func(c *Config) { c.MaxRegistersPerRequest = 126 }, "max_registers_per_request: 126"},
		{"min interval", func(c *Config) { c.MinInterval = -1 }, "min_interval"},
		{"breaker timeouts", func(c *Config) { c.Breaker.Timeouts = -1 }, "breaker.timeouts"},
		{"breaker backoff", func(c *Config) { c.Breaker.Backoff = 0 }, "breaker.backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig
			c.URL = "tcp://10.0.0.5:502"
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	c := DefaultConfig
	c.URL = "tcp://a"
	if ep, err := c.endpoint(); err != nil || ep.addr != "a:502" || ep.kind != kindTCP {
		t.Errorf("endpoint without port = %+v, %v; want tcp a:502", ep, err)
	}
	c.Breaker = BreakerConfig{}
	if err := c.Validate(); err != nil {
		t.Errorf("breaker off (timeouts 0): %v", err)
	}
}

// Zero is not "unset": a key written as 0 keeps 0 (the defaults are for
// absent keys only), and a timeout of 0, which no request can keep, is
// refused by name.
func TestParseConfig_ZeroIsNotUnset(t *testing.T) {
	c, err := ParseConfig([]byte(`{"url": "tcp://10.0.0.5:502", "unit_id": 0, "max_gap": 0, "min_interval": "0s", "breaker": {"timeouts": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.UnitID != 0 || c.MaxGap != 0 || c.MinInterval != 0 || c.Breaker.Timeouts != 0 {
		t.Fatalf("zeros lost: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("zeros refused: %v", err)
	}
	d, _ := ParseConfig([]byte(`{"url": "tcp://10.0.0.5:502"}`))
	if d.UnitID != 1 || d.MaxGap != 16 || d.Breaker.Timeouts != 3 {
		t.Fatalf("absent keys: %+v, want the defaults", d)
	}
	z, _ := ParseConfig([]byte(`{"url": "tcp://10.0.0.5:502", "timeout": "0s"}`))
	if err := z.Validate(); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("timeout 0: %v", err)
	}
}
