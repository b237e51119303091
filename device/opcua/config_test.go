package opcua

import (
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/device"
)

func TestParseConfig_Strict(t *testing.T) {
	c, err := ParseConfig([]byte(`{"url": "opc.tcp://10.0.0.6:4840", "security_policy": "Basic256Sha256",
		"security_mode": "SignAndEncrypt", "auth": {"username": "op", "password_file": "/etc/qubiq/ua1.pw"},
		"timeout": "2s", "publishing_interval": 0.5, "pki_dir": "/var/lib/qubiq/pki"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "opc.tcp://10.0.0.6:4840" || c.Auth.Username != "op" || time.Duration(c.Timeout) != 2*time.Second ||
		time.Duration(c.PublishingInterval) != 500*time.Millisecond || time.Duration(c.SessionTimeout) != time.Minute {
		t.Errorf("decoded %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, tc := range []struct{ raw, key string }{
		{`{"url": "opc.tcp://h:4840", "polling": 1}`, "polling"},
		{`{"url": "opc.tcp://h:4840", "auth": {"user": "x"}}`, "user"},
	} {
		if _, err := ParseConfig([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("ParseConfig(%s) = %v, want an error naming %q", tc.raw, err, tc.key)
		}
	}
	if _, err := New(device.Config{Name: "ua1", Raw: []byte(`{"nope": true}`)}); err == nil || !strings.Contains(err.Error(), `"ua1"`) {
		t.Errorf("New with an unknown key: %v, want an error naming the device", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	good := DefaultConfig
	good.URL, good.PKIDir = "opc.tcp://127.0.0.1:4840", "/var/lib/qubiq/pki"
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if good.mode() != ModeNone {
		t.Errorf("default mode %s", good.mode())
	}
	sec := good
	sec.SecurityPolicy = PolicyAes256Sha256RsaPss
	if sec.mode() != ModeSignAndEncrypt {
		t.Errorf("mode with a secure policy defaults to %s, want SignAndEncrypt", sec.mode())
	}
	for _, tc := range []struct {
		key string
		mut func(*Config)
	}{
		{"url", func(c *Config) { c.URL = "" }},
		{"url", func(c *Config) { c.URL = "tcp://h:4840" }},
		{"url", func(c *Config) { c.URL = "opc.tcp://h:99999" }},
		{"security_policy", func(c *Config) { c.SecurityPolicy = "Basic128Rsa15" }},
		{"security_mode", func(c *Config) { c.SecurityMode = "Encrypt" }},
		{"security_mode", func(c *Config) { c.SecurityPolicy, c.SecurityMode = PolicyBasic256Sha256, ModeNone }},
		{"security_mode", func(c *Config) { c.SecurityMode = ModeSign }},
		{"auth.password_file", func(c *Config) { c.Auth.Username = "op" }},
		{"auth.username", func(c *Config) { c.Auth.PasswordFile = "/x" }},
		{"auth", func(c *Config) { c.Auth.CertFile = "/c" }},
		{"auth", func(c *Config) {
			c.Auth = AuthConfig{Username: "op", PasswordFile: "/p", CertFile: "/c", KeyFile: "/k"}
		}},
		{"timeout", func(c *Config) { c.Timeout = 0 }},
		{"publishing_interval", func(c *Config) { c.PublishingInterval = device.Duration(time.Millisecond) }},
		{"session_timeout", func(c *Config) { c.SessionTimeout = 0 }},
		{"reconnect_min", func(c *Config) { c.ReconnectMin = 0 }},
		{"reconnect_max", func(c *Config) { c.ReconnectMax = device.Duration(time.Millisecond) }},
		{"pki_dir", func(c *Config) { c.PKIDir = "" }},
		{"pki_dir", func(c *Config) { c.PKIDir = "pki" }},
		{"application_uri", func(c *Config) { c.ApplicationURI = "no scheme" }},
	} {
		c := good
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", c, err, tc.key)
		}
	}
}

func TestDriver_CheckPoint(t *testing.T) {
	d := NewDriver("ua1", DefaultConfig, nil)
	if err := d.CheckPoint(device.Point{Address: "ns=2;s=Speed", Type: 0}); err == nil {
		t.Error("CheckPoint without a type = nil")
	}
	if err := d.CheckPoint(device.Point{Address: "HR100", Type: 1}); err == nil || !strings.Contains(err.Error(), "HR100") {
		t.Errorf("CheckPoint(HR100) = %v, want an error naming the address", err)
	}
}

// TestCheckURL_Mistakes: the addresses people type without the scheme, or
// with an octet above 255, are refused with the fix in the message.
func TestCheckURL_Mistakes(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.6:4840":              `"10.0.0.6:4840": no scheme; write opc.tcp://10.0.0.6:4840`,
		"opc.tcp://10.0.0.256:4840": "10.0.0.256 is not an IPv4 address",
	} {
		if err := checkURL(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkURL(%q) = %v, want %q", in, err, want)
		}
	}
	if err := checkURL("opc.tcp://plc-7.local:4840/UA/Server"); err != nil {
		t.Errorf("a host name with a path: %v", err)
	}
}
