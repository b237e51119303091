package modbus

import (
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
		t.Errorf("defaults differ from DESIGN.md's project file: %+v", c)
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
	want := Config{URL: "tcp://plc:1502", UnitID: 0, Timeout: device.Duration(250 * time.Millisecond), WriteMode: WriteSingle,
		MaxGap: 0, MaxRegistersPerRequest: 60, MinInterval: device.Duration(20 * time.Millisecond),
		Breaker: BreakerConfig{Timeouts: 5, Backoff: device.Duration(2 * time.Second)}}
	if c != want {
		t.Errorf("ParseConfig = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseConfig_UnknownKey(t *testing.T) {
	for _, raw := range []string{`{"url": "tcp://a:502", "unitid": 1}`, `{"breaker": {"timeout": 3}}`} {
		_, err := ParseConfig([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("ParseConfig(%s) = %v, want an unknown field error", raw, err)
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
		{"bad scheme", func(c *Config) { c.URL = "udp://a:502" }, "scheme must be tcp"},
		{"no host", func(c *Config) { c.URL = "tcp://:502" }, "no host"},
		{"bad port", func(c *Config) { c.URL = "tcp://a:70000" }, "port"},
		{"path", func(c *Config) { c.URL = "tcp://a:502/x" }, "only tcp://host:port"},
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
	if addr, err := c.dialAddress(); err != nil || addr != "a:502" {
		t.Errorf("dialAddress without port = %q, %v; want a:502", addr, err)
	}
	c.Breaker = BreakerConfig{}
	if err := c.Validate(); err != nil {
		t.Errorf("breaker off (timeouts 0): %v", err)
	}
}
