package mqtt

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Gateway is what the link asks of the service layer: script pushes, runs
// and rollbacks, tag writes and value changes, the audit log, the health
// (its status message) and alarm transitions.
type Gateway interface {
	gateway.Tags
	gateway.Scripts
	gateway.Audit
	gateway.Health
}

// Message is one outgoing message: the topic below the base, its payload
// and retain flag, and when it was made (UTC).
type Message struct {
	Topic   string
	Payload []byte
	Retain  bool
	Queued  time.Time
}

// Queued is a message waiting in the outbox and its sequence number there.
type Queued struct {
	Seq uint64
	Message
}

// OutboxStats is the outbox now (the store's counts): messages and bytes
// queued, the oldest queue time, the last sequence number, the drops.
type OutboxStats struct {
	Depth   int
	Bytes   int64
	Oldest  time.Time
	LastSeq uint64
	Dropped uint64
}

// Outbox is the durable queue of outgoing messages (the bbolt outbox of
// package store, adapted by the daemon). Append commits before it returns
// and drops the oldest messages to stay in its bounds (returning how many);
// Read returns entries from a sequence number on, in order; Remove deletes
// the ones the broker acknowledged; Notify signals appends.
type Outbox interface {
	Append(ctx context.Context, msgs []Message) (dropped int, err error)
	Read(from uint64, n int) ([]Queued, error)
	Remove(ctx context.Context, seqs []uint64) error
	Expire(ctx context.Context) (int, error)
	Stats() OutboxStats
	Notify() <-chan struct{}
}

// Seen remembers command ids across restarts (the store's command-id
// memory): Remember records id at now and reports whether it was seen
// within window before.
type Seen interface {
	Remember(id string, now time.Time, window time.Duration) (bool, error)
}

// GrantConfig is one key id's grant as mqtt.grants writes it.
type GrantConfig struct {
	Scopes      []string
	WriteLevel  string
	Permissions []string
	Prefixes    []string
}

// Config is the mqtt: block of the daemon config (docs/mqtt.md).
type Config struct {
	Brokers       []string
	CA            string // PEM file of the CAs trusted for the broker (empty: the system's)
	Cert, Key     string // PEM files of the client certificate and key (both or neither)
	Username      string
	PasswordFile  string
	TrustedKeys   map[string]string // key id → base64 ed25519 public key
	Grants        map[string]GrantConfig
	RequireSigned bool
	StaleAfter    time.Duration // default 5m
	Keepalive     time.Duration // default 30s
	LiveLatency   time.Duration // default 2s
	OutboxMaxAge  time.Duration
}

// Defaults of Config.
const (
	DefaultStaleAfter  = 5 * time.Minute
	DefaultKeepalive   = 30 * time.Second
	DefaultLiveLatency = 2 * time.Second
	DefaultQueue       = 64
	DefaultWorkers     = 2
	DefaultBackoffMin  = 500 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
)

// Options build a Link.
type Options struct {
	ApplianceID string
	Version     string
	Config      Config
	Gateway     Gateway
	Outbox      Outbox
	Seen        Seen
	Log         *slog.Logger
	// Publish is the tag publishing policy (the project's mqtt section);
	// nil publishes nothing.
	Publish *PublishPolicy
	// Alarms, when set, publishes alarm transitions on alarms/<path>.
	Alarms gateway.Alarms
	// Queue is the commands waiting for a worker before "busy"
	// (DefaultQueue); Workers run them (DefaultWorkers).
	Queue, Workers int
	// BackoffMin and BackoffMax bound the reconnect delay after every
	// broker of the list failed (defaults 500 ms and 30 s).
	BackoffMin, BackoffMax time.Duration
}

// keyring is the trusted keys with their grants, by key id.
type keyring map[string]trusted

type trusted struct {
	pub   ed25519.PublicKey // nil without require_signed and no key
	grant auth.Grant
}

// Check validates c as New does, without building anything
// (--check-config): every broker URL, every trusted key and grant, the TLS
// and password files. Every problem is in the error.
func (c Config) Check() error {
	_, err := c.keyring()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, b := range c.Brokers {
		if err := checkBroker(b); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.tlsConfig(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.password(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkBroker(b string) error {
	u, err := url.Parse(b)
	if err != nil {
		return fmt.Errorf("mqtt.brokers: %q: %w", b, err)
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
	default:
		return fmt.Errorf("mqtt.brokers: %q: scheme must be tcp, mqtt, ssl, tls or mqtts", b)
	}
	if u.Host == "" {
		return fmt.Errorf("mqtt.brokers: %q: no host", b)
	}
	return nil
}

// keyring builds the grants of the trusted keys. A grant's scopes,
// permissions and level must parse; a key id needs both a key and a grant
// (without require_signed a grant alone is enough: its commands are not
// verified).
func (c Config) keyring() (keyring, error) {
	kr := keyring{}
	var errs []error
	ids := map[string]bool{}
	for id := range c.TrustedKeys {
		ids[id] = true
	}
	for id := range c.Grants {
		ids[id] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		var t trusted
		if s, ok := c.TrustedKeys[id]; ok {
			pub, err := ParsePublicKey(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("mqtt.trusted_keys.%s: %w", id, err))
				continue
			}
			t.pub = pub
		} else if c.RequireSigned {
			errs = append(errs, fmt.Errorf("mqtt.grants.%s: no trusted key of that id (mqtt.trusted_keys)", id))
			continue
		}
		gc, ok := c.Grants[id]
		if !ok {
			errs = append(errs, fmt.Errorf("mqtt.trusted_keys.%s: no grant for the key (mqtt.grants.%s)", id, id))
			continue
		}
		g, err := gc.grant(id)
		if err != nil {
			errs = append(errs, fmt.Errorf("mqtt.grants.%s: %w", id, err))
			continue
		}
		t.grant = g
		kr[id] = t
	}
	return kr, errors.Join(errs...)
}

// grant makes the supervisor grant of key id: principal "mqtt:<id>",
// realm supervisor, origin "mqtt", exactly the configured scopes, level,
// permissions and prefixes (nothing a command sends widens it).
func (gc GrantConfig) grant(id string) (auth.Grant, error) {
	g := auth.Grant{Principal: "mqtt:" + id, Realm: auth.RealmSupervisor, Origin: "mqtt", Prefixes: gc.Prefixes}
	for _, s := range gc.Scopes {
		sc, err := auth.ParseScope(s)
		if err != nil {
			return g, err
		}
		g.Scopes = append(g.Scopes, sc)
	}
	for _, p := range gc.Permissions {
		pm, err := auth.ParsePermission(p)
		if err != nil {
			return g, err
		}
		g.Permissions = append(g.Permissions, pm)
	}
	lvl := gc.WriteLevel
	if lvl == "" {
		lvl = "view"
	}
	l, err := auth.ParseLevel(lvl)
	if err != nil {
		return g, fmt.Errorf("write_level: %w", err)
	}
	g.WriteLevel = l
	return g, nil
}

// tlsConfig loads the CA and client certificate files; nil when none is
// set.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.CA == "" && c.Cert == "" && c.Key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt.tls.ca: %s holds no PEM certificate", c.CA)
		}
		tc.RootCAs = pool
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, errors.New("mqtt.tls: cert and key go together")
	}
	if c.Cert != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.cert/key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// password reads password_file (trailing newline trimmed); "" without one.
func (c Config) password() (string, error) {
	if c.PasswordFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("mqtt.password_file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (c *Config) applyDefaults() {
	if c.StaleAfter <= 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.Keepalive <= 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.LiveLatency <= 0 {
		c.LiveLatency = DefaultLiveLatency
	}
}

// BaseTopic is the appliance's topic root: qubiq/v1/<appliance_id>.
func BaseTopic(applianceID string) string { return "qubiq/v1/" + applianceID }
