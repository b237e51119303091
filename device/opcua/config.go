package opcua

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
)

// Security policies a device may name in security_policy (OPC UA Part 7,
// security policy profiles). gopcua v0.8.0 implements all four.
const (
	PolicyNone                = "None"
	PolicyBasic256Sha256      = "Basic256Sha256"
	PolicyAes128Sha256RsaOaep = "Aes128_Sha256_RsaOaep"
	PolicyAes256Sha256RsaPss  = "Aes256_Sha256_RsaPss"
)

// Message security modes a device may name in security_mode (OPC UA Part 4
// §7.20).
const (
	ModeNone           = "None"
	ModeSign           = "Sign"
	ModeSignAndEncrypt = "SignAndEncrypt"
)

var policyURIs = map[string]string{
	PolicyNone:                ua.SecurityPolicyURINone,
	PolicyBasic256Sha256:      ua.SecurityPolicyURIBasic256Sha256,
	PolicyAes128Sha256RsaOaep: ua.SecurityPolicyURIAes128Sha256RsaOaep,
	PolicyAes256Sha256RsaPss:  ua.SecurityPolicyURIAes256Sha256RsaPss,
}

var modes = map[string]ua.MessageSecurityMode{
	ModeNone:           ua.MessageSecurityModeNone,
	ModeSign:           ua.MessageSecurityModeSign,
	ModeSignAndEncrypt: ua.MessageSecurityModeSignAndEncrypt,
}

// Config is the driver-specific part of an opcua device in the project file
// (docs/project.md, Project file), decoded strictly from JSON with snake_case keys.
// Start from DefaultConfig: keys absent from the JSON keep their default.
type Config struct {
	// URL is the server endpoint, "opc.tcp://host:port[/path]". Required.
	// The driver always dials this URL, whatever host name the server
	// announces in its endpoint descriptions.
	URL string `json:"url"`
	// SecurityPolicy is PolicyNone (default), PolicyBasic256Sha256,
	// PolicyAes128Sha256RsaOaep or PolicyAes256Sha256RsaPss. The driver uses
	// exactly the endpoint with this policy and SecurityMode, never a weaker
	// one (docs/architecture.md, Rules from the field).
	SecurityPolicy string `json:"security_policy"`
	// SecurityMode is ModeNone, ModeSign or ModeSignAndEncrypt. Empty means
	// None with policy None and SignAndEncrypt with any other policy.
	SecurityMode string `json:"security_mode"`
	// Auth selects the user identity token: anonymous (all fields empty),
	// username and password_file, or cert_file and key_file.
	Auth AuthConfig `json:"auth"`
	// Timeout bounds each service call (connect, read, write, browse).
	Timeout device.Duration `json:"timeout"`
	// PublishingInterval is the publishing interval of subscriptions whose
	// caller names none (SubscribeOptions); a scan class passes its own.
	// A server silent for 3 publishing intervals is noticed and the
	// connection rebuilt (keep-alive count 2, see subscription.go).
	PublishingInterval device.Duration `json:"publishing_interval"`
	// SessionTimeout is the session timeout requested in CreateSession
	// (OPC UA Part 4 §5.6.2); the driver keeps the session alive with a read
	// of ServerStatus.CurrentTime at half the revised timeout
	// (docs/opcua.md, fault C16).
	SessionTimeout device.Duration `json:"session_timeout"`
	// ReconnectMin and ReconnectMax bound the capped exponential backoff
	// (with jitter) between connection attempts. A server answering
	// BadTooManySessions makes the driver wait at least 5 × ReconnectMin
	// (docs/opcua.md, fault C15).
	ReconnectMin device.Duration `json:"reconnect_min"`
	ReconnectMax device.Duration `json:"reconnect_max"`
	// PKIDir is the certificate store: own/ (this client's application
	// instance certificate, made at first start), trusted/ and rejected/
	// (docs/config.md, Data directory). The daemon sets it to <data_dir>/pki for
	// every opcua device; a project file need not name it.
	PKIDir string `json:"pki_dir"`
	// ApplicationURI is this client's ApplicationURI, written into the SAN of
	// the application instance certificate (OPC UA Part 6 §6.2.2). Default
	// "urn:<hostname>:qubiq:edge".
	ApplicationURI string `json:"application_uri"`
}

// AuthConfig is the user identity token of a device (OPC UA Part 4 §7.36):
// empty for anonymous, Username with PasswordFile (the file holds the
// password; one trailing newline is dropped), or CertFile with KeyFile (PEM
// or DER; an RSA key, PKCS#1 or PKCS#8).
type AuthConfig struct {
	Username     string `json:"username,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	CertFile     string `json:"cert_file,omitempty"`
	KeyFile      string `json:"key_file,omitempty"`
}

// kind returns "anonymous", "username" or "certificate".
func (a AuthConfig) kind() string {
	switch {
	case a.Username != "" || a.PasswordFile != "":
		return "username"
	case a.CertFile != "" || a.KeyFile != "":
		return "certificate"
	}
	return "anonymous"
}

// DefaultConfig holds the defaults of every key but url and pki_dir.
var DefaultConfig = Config{
	SecurityPolicy:     PolicyNone,
	Timeout:            device.Duration(5 * time.Second),
	PublishingInterval: device.Duration(time.Second),
	SessionTimeout:     device.Duration(60 * time.Second),
	ReconnectMin:       device.Duration(time.Second),
	ReconnectMax:       device.Duration(60 * time.Second),
}

// configHints are the keys people write for an OPC UA device by habit,
// with what to write instead.
var configHints = map[string]string{
	"host":     "use url: opc.tcp://HOST:PORT",
	"port":     "use url: opc.tcp://HOST:PORT",
	"ip":       "use url: opc.tcp://HOST:PORT",
	"endpoint": "use url: opc.tcp://HOST:PORT",
	"username": `use auth: {username: NAME, password_file: FILE}`,
	"password": `use auth: {username: NAME, password_file: FILE} (passwords are read from a file)`,
}

// ParseConfig strict-decodes raw over DefaultConfig; an unknown key is an
// error naming it. It does not validate: call Validate.
func ParseConfig(raw []byte) (Config, error) {
	c := DefaultConfig
	if err := device.DecodeStrict(raw, &c, configHints); err != nil {
		return c, fmt.Errorf("opcua config: %w", err)
	}
	return c, nil
}

// mode returns the effective security mode name.
func (c Config) mode() string {
	if c.SecurityMode != "" {
		return c.SecurityMode
	}
	if c.SecurityPolicy == "" || c.SecurityPolicy == PolicyNone {
		return ModeNone
	}
	return ModeSignAndEncrypt
}

// policy returns the effective security policy name.
func (c Config) policy() string {
	if c.SecurityPolicy == "" {
		return PolicyNone
	}
	return c.SecurityPolicy
}

// appURI returns the effective application URI.
func (c Config) appURI() string {
	if c.ApplicationURI != "" {
		return c.ApplicationURI
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return "urn:" + h + ":qubiq:edge"
}

// Validate checks every key and returns all the problems at once, each
// naming its key. It is pure: files named by the config are read by Open.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("opcua config: %s: "+format, append([]any{key}, args...)...))
	}
	if err := checkURL(c.URL); err != nil {
		bad("url", "%v", err)
	}
	pol := c.policy()
	if _, ok := policyURIs[pol]; !ok {
		bad("security_policy", "%q: want None, Basic256Sha256, Aes128_Sha256_RsaOaep or Aes256_Sha256_RsaPss", c.SecurityPolicy)
	}
	mode := c.mode()
	if _, ok := modes[mode]; !ok {
		bad("security_mode", "%q: want None, Sign or SignAndEncrypt", c.SecurityMode)
	} else if (pol == PolicyNone) != (mode == ModeNone) {
		bad("security_mode", "%s does not go with security_policy %s (None goes only with None)", mode, pol)
	}
	switch c.Auth.kind() {
	case "username":
		if c.Auth.Username == "" {
			bad("auth.username", "required with auth.password_file")
		}
		if c.Auth.PasswordFile == "" {
			bad("auth.password_file", "required with auth.username")
		}
		if c.Auth.CertFile != "" || c.Auth.KeyFile != "" {
			bad("auth", "username and cert_file are exclusive")
		}
	case "certificate":
		if c.Auth.CertFile == "" || c.Auth.KeyFile == "" {
			bad("auth", "cert_file and key_file go together")
		}
	}
	if c.Timeout <= 0 {
		bad("timeout", "must be > 0, got %s", time.Duration(c.Timeout))
	}
	if c.PublishingInterval < device.Duration(10*time.Millisecond) {
		bad("publishing_interval", "must be >= 10ms, got %s", time.Duration(c.PublishingInterval))
	}
	if c.SessionTimeout < device.Duration(100*time.Millisecond) {
		bad("session_timeout", "must be >= 100ms, got %s", time.Duration(c.SessionTimeout))
	}
	if c.ReconnectMin <= 0 {
		bad("reconnect_min", "must be > 0, got %s", time.Duration(c.ReconnectMin))
	}
	if c.ReconnectMax < c.ReconnectMin {
		bad("reconnect_max", "must be >= reconnect_min (%s), got %s", time.Duration(c.ReconnectMin), time.Duration(c.ReconnectMax))
	}
	if c.PKIDir == "" {
		bad("pki_dir", "required (the daemon sets <data_dir>/pki)")
	} else if !filepath.IsAbs(c.PKIDir) {
		bad("pki_dir", "%q must be an absolute path", c.PKIDir)
	}
	if c.ApplicationURI != "" {
		if u, err := url.Parse(c.ApplicationURI); err != nil || u.Scheme == "" {
			bad("application_uri", "%q is not a URI", c.ApplicationURI)
		}
	}
	return errors.Join(errs...)
}

// dottedQuad matches a host written as four dot-separated numbers, meant
// as an IPv4 address.
var dottedQuad = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$`)

// checkURL accepts "opc.tcp://host[:port][/path]".
func checkURL(s string) error {
	if s == "" {
		return errors.New("required (opc.tcp://host:port)")
	}
	if !strings.Contains(s, "://") {
		return fmt.Errorf("%q: no scheme; write opc.tcp://%s", s, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	if u.Scheme != "opc.tcp" {
		return fmt.Errorf("%q: scheme must be opc.tcp", s)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q: no host", s)
	}
	if h := u.Hostname(); dottedQuad.MatchString(h) && net.ParseIP(h) == nil {
		return fmt.Errorf("%q: %s is not an IPv4 address (each of the four numbers is 0 to 255)", s, h)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: only opc.tcp://host:port[/path] is allowed", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q out of range 1..65535", s, p)
		}
	}
	if strings.ContainsAny(u.Hostname(), " \t") || net.ParseIP(strings.Trim(u.Hostname(), "[]")) == nil && strings.Contains(u.Hostname(), ":") {
		return fmt.Errorf("%q: bad host", s)
	}
	return nil
}
