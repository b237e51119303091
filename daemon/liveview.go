package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/api/liveview"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/store"
)

// LiveView is the browser side of the daemon (issue 7): users and their
// sessions, the project's views, the escape hatch, the listener's TLS, and
// provisioning. newLiveView builds it; Config and Deps hand it to the API.
type LiveView struct {
	s        *System
	users    *auth.Users
	sessions *auth.Sessions
	views    []apitypes.View
	entries  map[string][]string
	hatch    bool
	tlsConf  *tls.Config
	tlsInfo  *apitypes.TLSInfo
}

// AdminUser is the platform user POST /provision creates, with every
// permission (DESIGN.md, "Credentials on first start").
const AdminUser = "admin"

// newLiveView builds the browser side from the config and the project:
// users over the store (seeding the project's users), sessions reloaded
// from the store, the views parsed and checked against the project's tags
// and scripts, the escape hatch from the environment (logged as a
// warning), and the listener's TLS (http.tls).
func (s *System) newLiveView() (*LiveView, error) {
	lv := &LiveView{s: s, entries: map[string][]string{}}
	lv.users = auth.NewUsers(s.DB.AuthUserStore(), auth.UsersOptions{})
	var err error
	if lv.sessions, err = auth.NewSessions(s.DB.AuthSessionStore(), lv.users, auth.SessionOptions{}); err != nil {
		return nil, err
	}
	if err := lv.seedUsers(); err != nil {
		return nil, err
	}
	if lv.views, err = ParseViews(s.Project().Views, s.Project().Tags, s.Project().Scripts, s.Project().File); err != nil {
		return nil, err
	}
	for _, sc := range s.Project().Scripts {
		lv.entries[sc.Module] = sc.LiveView
	}
	if os.Getenv(auth.EscapeHatchEnv) == "off" {
		lv.hatch = true
		s.Log.Warn("escape hatch on: scripts started from LiveView panels run unrestricted; every such run is audited",
			slog.String("env", auth.EscapeHatchEnv+"=off"))
	}
	if lv.tlsConf, lv.tlsInfo, err = TLSConfig(s.Config.HTTP.TLS, s.Config.File, s.Config.DataDir, s.Config.HTTP.Listen, s.Config.ApplianceID, s.Log); err != nil {
		return nil, err
	}
	return lv, nil
}

// Config returns the API listener's config: listen address and TLS.
func (lv *LiveView) Config(listen string) api.Config {
	return api.Config{Addr: listen, TLS: lv.tlsConf}
}

// Deps completes d with the browser side: sessions, users, views, live
// values, provisioning and the TLS description for health.
func (lv *LiveView) Deps(d api.Deps) api.Deps {
	d.Sessions = sessionsAPI{lv}
	d.Users = usersAPI{lv}
	d.LiveView = viewsAPI{lv}
	d.Live = liveAPI{lv.s}
	d.Provision = provisioner{lv}
	d.TLS = lv.tlsInfo
	return d
}

// Sweep ends expired sessions every minute until ctx ends, so WebSockets of
// sessions nobody uses close too (lookups end expired sessions anyway).
func (lv *LiveView) Sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := lv.sessions.Sweep(); err != nil {
				lv.s.Log.Error("session sweep failed", slog.Any("err", err))
			} else if n > 0 {
				lv.s.Log.Info("sessions expired", slog.Int("count", n))
			}
		}
	}
}

// ---- views ----

// ParseViews parses the project's views (package api/liveview's shape)
// against its tags and scripts; the error names the file, the view and the
// line. --check-config calls it too.
func ParseViews(nodes []yaml.Node, tags []config.TagConfig, scripts []config.ScriptConfig, file string) ([]apitypes.View, error) {
	p := liveview.Project{Tags: map[string]string{}, Entries: map[string][]string{}}
	for _, t := range tags {
		p.Tags[t.Path] = t.Units
	}
	for _, sc := range scripts {
		p.Entries[sc.Module] = append([]string{}, sc.LiveView...)
	}
	views, err := liveview.Parse(nodes, p)
	if err != nil {
		return nil, fmt.Errorf("%s: views: %w", file, err)
	}
	return views, nil
}

// ---- users ----

// seedUser is one element of the project's `users:` (password hashes
// only): created at start when the name is free, never overwritten.
type seedUser struct {
	Name         string   `yaml:"name"`
	Realm        string   `yaml:"realm"`
	Level        string   `yaml:"level"`
	Permissions  []string `yaml:"permissions"`
	PasswordHash string   `yaml:"password_hash"`
}

var seedKeys = []string{"name", "realm", "level", "permissions", "password_hash"}

func (lv *LiveView) seedUsers() error {
	var errs []error
	for i := range lv.s.Project().Users {
		n := &lv.s.Project().Users[i]
		where := fmt.Sprintf("%s:%d: users[%d]", lv.s.Project().File, n.Line, i)
		if n.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s: want a mapping", where))
			continue
		}
		bad := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j]; !slices.Contains(seedKeys, k.Value) {
				errs = append(errs, fmt.Errorf("%s:%d: unknown key %q (want %s)", lv.s.Project().File, k.Line, k.Value, strings.Join(seedKeys, ", ")))
				bad = true
			}
		}
		var su seedUser
		if err := n.Decode(&su); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if bad {
			continue
		}
		u, err := userRecord(su.Name, su.Realm, su.Level, su.Permissions)
		if err == nil {
			u.Hash = su.PasswordHash
			var created bool
			if created, err = lv.users.Seed(u); created {
				lv.s.Log.Info("seed user created", slog.String("user", u.Name), slog.String("realm", string(u.Realm)))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errors.Join(errs...)
}

// userRecord builds a user from wire names; the error wraps
// auth.ErrInvalidUser and names the bad value.
func userRecord(name, realm, level string, perms []string) (auth.UserRecord, error) {
	u := auth.UserRecord{Name: name, Realm: auth.Realm(realm)}
	if level != "" {
		l, err := auth.ParseLevel(level)
		if err != nil {
			return u, fmt.Errorf("%w: user %q: %v", auth.ErrInvalidUser, name, err)
		}
		u.Level = l
	}
	for _, p := range perms {
		pp, err := auth.ParsePermission(p)
		if err != nil {
			return u, fmt.Errorf("%w: user %q: %v", auth.ErrInvalidUser, name, err)
		}
		u.Permissions = append(u.Permissions, pp)
	}
	return u, auth.CheckUser(u)
}

func userInfo(u auth.UserRecord) apitypes.UserInfo {
	out := apitypes.UserInfo{Name: u.Name, Realm: string(u.Realm), Disabled: u.Disabled, Created: u.Created, Changed: u.Changed,
		Permissions: []string{}}
	if u.Level != auth.LevelNone {
		out.Level = u.Level.String()
	}
	for _, p := range u.Permissions {
		out.Permissions = append(out.Permissions, string(p))
	}
	return out
}

// usersAPI is /api/v1/users; every change is audited, and a password
// change or a disable ends the user's sessions at once.
type usersAPI struct{ lv *LiveView }

func (a usersAPI) ListUsers(context.Context) ([]apitypes.UserInfo, error) {
	us, err := a.lv.users.List()
	if err != nil {
		return nil, err
	}
	out := make([]apitypes.UserInfo, len(us))
	for i, u := range us {
		out[i] = userInfo(u)
	}
	return out, nil
}

func userErr(err error) error {
	switch {
	case errors.Is(err, auth.ErrInvalidUser):
		return fmt.Errorf("%w: %v", api.ErrInvalid, err)
	case errors.Is(err, auth.ErrUserExists):
		return fmt.Errorf("%v: %w", err, api.ErrConflict)
	case errors.Is(err, auth.ErrNotFound):
		return fmt.Errorf("%v: %w", err, api.ErrNotFound)
	}
	return err
}

func (a usersAPI) AddUser(_ context.Context, g auth.Grant, req apitypes.UserRequest) error {
	u, err := userRecord(req.Name, req.Realm, req.Level, req.Permissions)
	if err == nil {
		err = a.lv.users.Add(u, req.Password)
	}
	if err != nil {
		return userErr(err)
	}
	a.lv.s.auditAdmin(g, "user.add", req.Name, map[string]any{"realm": req.Realm, "level": req.Level, "permissions": req.Permissions})
	return nil
}

func (a usersAPI) SetPassword(_ context.Context, g auth.Grant, name, password string) error {
	if err := a.lv.users.SetPassword(name, password); err != nil {
		return userErr(err)
	}
	n, err := a.lv.sessions.RevokeUser(name)
	a.lv.s.auditAdmin(g, "user.passwd", name, map[string]any{"sessions_ended": n})
	return err
}

func (a usersAPI) DisableUser(_ context.Context, g auth.Grant, name string) error {
	if err := a.lv.users.Disable(name); err != nil {
		return userErr(err)
	}
	n, err := a.lv.sessions.RevokeUser(name)
	a.lv.s.auditAdmin(g, "user.disable", name, map[string]any{"sessions_ended": n})
	return err
}

// ---- sessions ----

// sessionsAPI is login, session lookup and logout; logins and their
// refusals are audited.
type sessionsAPI struct{ lv *LiveView }

func (a sessionsAPI) Login(_ context.Context, name, password, addr string) (string, auth.SessionInfo, error) {
	g := auth.Grant{Principal: name, Origin: "liveview"}
	u, err := a.lv.users.Login(name, password, addr)
	var rl *auth.RateLimitedError
	switch {
	case errors.As(err, &rl):
		a.lv.s.auditResult(g, "auth.login.refused", name, "rate_limited", rl.Error()+" (from "+addr+")")
		return "", auth.SessionInfo{}, err
	case errors.Is(err, auth.ErrBadCredentials):
		a.lv.s.auditResult(g, "auth.login.refused", name, "unauthenticated", "wrong user name or password (from "+addr+")")
		return "", auth.SessionInfo{}, fmt.Errorf("login %q: %w", name, api.ErrUnauthenticated)
	case err != nil:
		return "", auth.SessionInfo{}, err
	}
	tok, info, err := a.lv.sessions.Create(u, addr)
	if err != nil {
		return "", auth.SessionInfo{}, err
	}
	g.Realm = u.Realm
	a.lv.s.auditResult(g, "auth.login", name, "ok", "session "+info.ShortID()+" from "+addr)
	a.lv.s.apiSeen.Store(time.Now().UnixNano())
	return tok, info, nil
}

func (a sessionsAPI) Session(_ context.Context, token string, touch bool) (auth.SessionInfo, error) {
	info, err := a.lv.sessions.Lookup(token, touch)
	if errors.Is(err, auth.ErrSessionEnded) {
		return info, fmt.Errorf("%w: %v", api.ErrUnauthenticated, err)
	}
	if err == nil {
		a.lv.s.apiSeen.Store(time.Now().UnixNano())
	}
	return info, err
}

func (a sessionsAPI) Logout(_ context.Context, token string) error {
	info, err := a.lv.sessions.Lookup(token, false)
	if err == nil {
		a.lv.s.auditResult(auth.Grant{Principal: info.User, Realm: info.Realm, Origin: "liveview"}, "auth.logout", info.User, "ok", "session "+info.ShortID())
	}
	return a.lv.sessions.Logout(token)
}

func (a sessionsAPI) IdleTimeout() time.Duration { return a.lv.sessions.Options().Idle }

// ---- views and the panel's audit trail ----

type viewsAPI struct{ lv *LiveView }

func (v viewsAPI) Views(context.Context) []apitypes.View { return v.lv.views }

func (v viewsAPI) Exposed(module, entry string) bool {
	return slices.Contains(v.lv.entries[module], entry)
}

func (v viewsAPI) EscapeHatch() bool { return v.lv.hatch }

func (v viewsAPI) CanAudit() error { return auditSink{v.lv.s}.CanAudit() }

func (v viewsAPI) Audit(_ context.Context, ev api.PanelAudit) error {
	rec := store.AuditRecord{Time: time.Now().UTC(), Principal: ev.Grant.Principal, Realm: string(ev.Grant.Realm),
		Origin: ev.Grant.Origin, Action: ev.Action, Target: ev.Target, Result: ev.Result, Detail: ev.Detail}
	if ev.After != nil {
		b, err := json.Marshal(ev.After)
		if err != nil {
			return fmt.Errorf("audit %s: %w", ev.Action, err)
		}
		rec.After = b
	}
	return v.lv.s.Audit.Enqueue(rec)
}

// panelScan bounds how many of the newest audit records a panel's event
// list looks through.
const panelScan = 20000

func (v viewsAPI) PanelEvents(ctx context.Context, panel string, limit int) ([]apitypes.PanelEvent, error) {
	origin := "liveview:" + panel
	// Records still queued are not on disk yet: a press's record must show
	// in the list the panel fetches right after it.
	if err := v.lv.s.Audit.Flush(ctx); err != nil {
		v.lv.s.Log.Warn("audit flush before a panel's event list failed", slog.Any("err", err))
	}
	recs, err := v.lv.s.DB.RecentAuditRecords(limit, panelScan, func(r store.AuditRecord) bool { return r.Origin == origin })
	if err != nil {
		return nil, err
	}
	out := make([]apitypes.PanelEvent, len(recs))
	for i, r := range recs {
		out[i] = apitypes.PanelEvent{Seq: r.Seq, Time: r.Time, Principal: r.Principal, Realm: r.Realm, Action: r.Action,
			Target: r.Target, Result: r.Result, Detail: r.Detail, After: r.After}
	}
	return out, nil
}

// ---- live values ----

// liveAPI feeds the WebSocket from the tag engine's change fan-out.
type liveAPI struct{ s *System }

func (l liveAPI) SubscribeValues(g auth.Grant, buf int) (<-chan apitypes.TagValue, func() uint64, func()) {
	in, engineDropped, unsubscribe := l.s.Engine().Subscribe(buf)
	out := make(chan apitypes.TagValue, buf)
	stop := make(chan struct{})
	var lost atomic.Uint64
	go func() {
		for {
			select {
			case <-stop:
				return
			case c := <-in:
				if !g.HasScope(auth.TagRead) || !g.AllowsPath(c.Path) {
					continue
				}
				select {
				case out <- apitypes.FromVQT(c.Path, c.VQT):
				default:
					lost.Add(1)
				}
			}
		}
	}()
	var once atomic.Bool
	return out, func() uint64 { return engineDropped() + lost.Load() }, func() {
		if once.CompareAndSwap(false, true) {
			unsubscribe()
			close(stop)
		}
	}
}

// ---- provisioning ----

// provisioner is POST /provision: only the bootstrap token may call it; it
// creates the platform user "admin" with every permission and the given
// password, then revokes the bootstrap token for good (memory, store and
// file).
type provisioner struct{ lv *LiveView }

func (p provisioner) Provision(_ context.Context, g auth.Grant, password string) error {
	s := p.lv.s
	if g.Realm != auth.RealmBootstrap {
		return &auth.DeniedError{Kind: "permission", Need: "the bootstrap token", Target: "provision"}
	}
	admin := auth.UserRecord{Name: AdminUser, Realm: auth.RealmPlatform, Permissions: slices.Clone(auth.AllPermissions)}
	if err := p.lv.users.Add(admin, password); err != nil {
		return userErr(err)
	}
	if err := s.DB.PutMeta(metaBootstrapHash, []byte{}); err != nil {
		return fmt.Errorf("provision: revoke the bootstrap token: %w", err)
	}
	s.Keys.SetBootstrapHash(nil)
	path := filepath.Join(s.Config.DataDir, BootstrapTokenFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.Log.Warn("bootstrap token file not removed (the token is revoked anyway)", slog.String("file", path), slog.Any("err", err))
	}
	s.auditAdmin(g, "provision", AdminUser, map[string]any{"bootstrap_token": "revoked"})
	s.Log.Info("provisioned: admin password set, bootstrap token revoked")
	return nil
}

// auditResult records an action with its result; a record that cannot be
// queued is logged as lost.
func (s *System) auditResult(g auth.Grant, action, target, result, detail string) {
	rec := store.AuditRecord{Time: time.Now().UTC(), Principal: g.Principal, Realm: string(g.Realm), Origin: g.Origin,
		Action: action, Target: target, Result: result, Detail: detail}
	if err := s.Audit.Enqueue(rec); err != nil {
		s.Log.Error("audit record lost", slog.String("action", action), slog.Any("err", err))
	}
}

// ---- TLS ----

// TLSFiles are the names of the self-signed certificate and key in
// <data_dir>/tls (DESIGN.md, "Data directory").
const (
	TLSCertFile = "cert.pem"
	TLSKeyFile  = "key.pem"
)

// TLSConfig reads http.tls (DESIGN.md, Daemon config): "off" (or absent)
// gives nil; "auto" loads <dataDir>/tls/cert.pem and key.pem, making a
// self-signed ECDSA P-256 certificate there on first start (names:
// localhost, the host name, the appliance id; addresses: loopback and the
// listen address); {cert: FILE, key: FILE} loads those files, relative to
// the config file's directory. The certificate's SHA-256 fingerprint is
// logged and returned for health.
func TLSConfig(n yaml.Node, configFile, dataDir, listen, applianceID string, log *slog.Logger) (*tls.Config, *apitypes.TLSInfo, error) {
	var cert tls.Certificate
	mode := ""
	switch {
	case n.Kind == 0 || (n.Kind == yaml.ScalarNode && (n.Value == "off" || n.Value == "false" || n.Value == "")):
		return nil, nil, nil
	case n.Kind == yaml.ScalarNode && n.Value == "auto":
		mode = "auto"
		var err error
		if cert, err = autoCert(filepath.Join(dataDir, "tls"), listen, applianceID, log); err != nil {
			return nil, nil, err
		}
	case n.Kind == yaml.MappingNode:
		mode = "files"
		var files struct {
			Cert string `yaml:"cert"`
			Key  string `yaml:"key"`
		}
		if err := n.Decode(&files); err != nil || files.Cert == "" || files.Key == "" || len(n.Content) != 4 {
			return nil, nil, fmt.Errorf("%s:%d: http.tls: want off, auto or {cert: FILE, key: FILE}", configFile, n.Line)
		}
		dir := filepath.Dir(configFile)
		abs := func(p string) string {
			if filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(dir, p)
		}
		var err error
		if cert, err = tls.LoadX509KeyPair(abs(files.Cert), abs(files.Key)); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: http.tls: %w", configFile, n.Line, err)
		}
	default:
		return nil, nil, fmt.Errorf("%s:%d: http.tls %q: want off, auto or {cert: FILE, key: FILE}", configFile, n.Line, n.Value)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("http.tls: certificate: %w", err)
	}
	info := &apitypes.TLSInfo{Mode: mode, FingerprintSHA256: Fingerprint(leaf.Raw), NotAfter: leaf.NotAfter.UTC()}
	log.Info("https on", slog.String("mode", mode), slog.String("fingerprint_sha256", info.FingerprintSHA256),
		slog.Time("not_after", info.NotAfter))
	if time.Until(leaf.NotAfter) < 30*24*time.Hour {
		log.Warn("TLS certificate expires soon", slog.Time("not_after", leaf.NotAfter))
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, info, nil
}

// Fingerprint is the SHA-256 of der as colon-separated upper-case hex
// pairs (as browsers show it).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

var dnsName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// autoCert loads the certificate in dir, or makes a self-signed one there.
func autoCert(dir, listen, applianceID string, log *slog.Logger) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, TLSCertFile), filepath.Join(dir, TLSKeyFile)
	if _, err := os.Stat(certPath); err == nil {
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return cert, fmt.Errorf("http.tls auto: %w", err)
		}
		return cert, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: serial: %w", err)
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && dnsName.MatchString(h) {
		names = append(names, h)
	}
	if dnsName.MatchString(applianceID) && !slices.Contains(names, applianceID) {
		names = append(names, applianceID)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
			ips = append(ips, ip)
		}
	}
	now := time.Now()
	cn := "QUBIQ Edge"
	if applianceID != "" {
		cn += " " + applianceID
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"QUBIQ Edge (self-signed)"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), DNSNames: names, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: key: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: %w", err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: %w", err)
	}
	log.Warn("first start with http.tls auto: self-signed certificate made; compare its fingerprint when a browser or qubiqctl asks",
		slog.String("file", certPath), slog.String("fingerprint_sha256", Fingerprint(der)))
	return tls.LoadX509KeyPair(certPath, keyPath)
}
