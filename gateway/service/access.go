package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
)

// Credentials, sessions and users (gateway.Credentials, gateway.Sessions,
// gateway.Users), and provisioning.

// BootstrapTokenFile is the name of the one-time token file in the data
// dir (README: credentials on first start).
const BootstrapTokenFile = "bootstrap-token"

// AdminUser is the platform user Provision creates, with every
// permission.
const AdminUser = "admin"

const metaBootstrapHash = "bootstrap_token_hash"

// initAccess opens users and sessions over the store (seeding the
// project's users) and writes the bootstrap token on an empty store.
func (s *Service) initAccess() error {
	s.users = auth.NewUsers(s.db.AuthUserStore(), auth.UsersOptions{})
	var err error
	if s.sessions, err = auth.NewSessions(s.db.AuthSessionStore(), s.users, auth.SessionOptions{}); err != nil {
		return err
	}
	if err := s.seedUsers(); err != nil {
		return err
	}
	return s.bootstrap()
}

// bootstrap writes the one-time bootstrap token on an empty store (no API
// key, no bootstrap hash, never provisioned) and re-arms an existing one.
func (s *Service) bootstrap() error {
	h, err := s.db.Meta(metaBootstrapHash)
	if err != nil {
		return err
	}
	if h != nil {
		if len(h) > 0 {
			s.keys.SetBootstrapHash(h)
		}
		return nil
	}
	keys, err := s.db.APIKeys()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		return nil
	}
	tok, hash, err := auth.NewBootstrapToken()
	if err != nil {
		return err
	}
	path := filepath.Join(s.opts.DataDir, BootstrapTokenFile)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := s.db.PutMeta(metaBootstrapHash, hash); err != nil {
		return err
	}
	s.keys.SetBootstrapHash(hash)
	s.log.Warn("first start: one-time bootstrap token written; use it to create API keys, then provision", slog.String("file", path))
	return nil
}

// Authenticate returns the grant of a bearer token (gateway.Credentials).
func (s *Service) Authenticate(_ context.Context, bearer string) (auth.Grant, error) {
	g, err := s.keys.Authenticate(bearer)
	switch {
	case errors.Is(err, auth.ErrRevokedToken):
		return auth.Grant{}, &gateway.CredentialError{Reason: gateway.CredentialRevoked}
	case errors.Is(err, auth.ErrExpiredToken):
		return auth.Grant{}, &gateway.CredentialError{Reason: gateway.CredentialExpired}
	case err != nil:
		return auth.Grant{}, &gateway.CredentialError{Reason: gateway.CredentialUnknown}
	}
	return g, nil
}

// stillValid refuses a grant whose credential ended after the grant was
// made: its API key revoked or expired, the bootstrap token revoked
// (auth.Keys.StillValid), or its browser session logged out, revoked or
// timed out (auth.Sessions.StillValid). Every system.* call of a script
// checks it, so a run stops at its next call, whatever started it.
func (s *Service) stillValid(g auth.Grant) error {
	if err := s.keys.StillValid(g); err != nil {
		return err
	}
	if s.sessions != nil {
		return s.sessions.StillValid(g)
	}
	return nil
}

// CreateAPIKey issues a key never wider than g, and audits it
// (gateway.Credentials).
func (s *Service) CreateAPIKey(_ context.Context, g auth.Grant, req gateway.NewAPIKey) (gateway.APIKeyCreated, error) {
	rec := auth.KeyRecord{Name: req.Name, Scopes: req.Scopes, WriteLevel: req.WriteLevel, Permissions: req.Permissions,
		Prefixes: req.Prefixes, Expires: req.Expires.UTC()}
	if strings.TrimSpace(req.Name) == "" {
		return gateway.APIKeyCreated{}, fmt.Errorf(`%w: missing "name"`, gateway.ErrInvalid)
	}
	id, tok, err := s.keys.Create(g, rec)
	if err != nil {
		var de *auth.DeniedError
		if errors.As(err, &de) {
			return gateway.APIKeyCreated{}, err
		}
		return gateway.APIKeyCreated{}, fmt.Errorf("%w: %v", gateway.ErrInvalid, err)
	}
	scopes := make([]string, len(req.Scopes))
	for i, sc := range req.Scopes {
		scopes[i] = string(sc)
	}
	var perms []string
	for _, p := range req.Permissions {
		perms = append(perms, string(p))
	}
	s.auditAdmin(g, "apikey.create", id, map[string]any{"name": req.Name, "scopes": scopes,
		"write_level": req.WriteLevel.String(), "permissions": perms, "prefixes": req.Prefixes})
	return gateway.APIKeyCreated{ID: id, Token: tok}, nil
}

// ListAPIKeys lists the keys not revoked, never their tokens
// (gateway.Credentials).
func (s *Service) ListAPIKeys(context.Context) ([]gateway.APIKey, error) {
	recs, err := s.keys.List()
	if err != nil {
		return nil, err
	}
	out := []gateway.APIKey{}
	for _, r := range recs {
		if r.Revoked {
			continue
		}
		out = append(out, gateway.APIKey{ID: r.ID, Name: r.Name, Scopes: r.Scopes, WriteLevel: r.WriteLevel,
			Permissions: r.Permissions, Prefixes: r.Prefixes, Expires: r.Expires, Created: r.Created})
	}
	return out, nil
}

// RevokeAPIKey revokes a key on behalf of g, audited; a key already
// revoked is reported as such, not revoked (nor audited) again
// (gateway.Credentials).
func (s *Service) RevokeAPIKey(_ context.Context, g auth.Grant, id string) (bool, error) {
	notFound := func() error { return fmt.Errorf("api key %q: %w", id, gateway.ErrNotFound) }
	rec, err := s.keys.Record(id)
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, auth.ErrNotFound):
		return false, notFound()
	case err != nil:
		return false, err
	case rec.Revoked:
		return true, nil
	}
	if err := s.keys.Revoke(id); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, auth.ErrNotFound) {
			return false, notFound()
		}
		return false, err
	}
	s.auditAdmin(g, "apikey.revoke", id, nil)
	return false, nil
}

// Login checks a user's password and starts a session; logins and their
// refusals are audited (gateway.Sessions).
func (s *Service) Login(_ context.Context, name, password, addr string) (string, auth.SessionInfo, error) {
	g := auth.Grant{Principal: name, Origin: "liveview"}
	u, err := s.users.Login(name, password, addr)
	var rl *auth.RateLimitedError
	switch {
	case errors.As(err, &rl):
		s.auditResult(g, "auth.login.refused", name, "rate_limited", rl.Error()+" (from "+addr+")")
		return "", auth.SessionInfo{}, err
	case errors.Is(err, auth.ErrBadCredentials):
		s.auditResult(g, "auth.login.refused", name, "unauthenticated", "wrong user name or password (from "+addr+")")
		return "", auth.SessionInfo{}, fmt.Errorf("login %q: %w", name, gateway.ErrUnauthenticated)
	case err != nil:
		return "", auth.SessionInfo{}, err
	}
	tok, info, err := s.sessions.Create(u, addr)
	if err != nil {
		return "", auth.SessionInfo{}, err
	}
	g.Realm = u.Realm
	s.auditResult(g, "auth.login", name, "ok", "session "+info.ShortID()+" from "+addr)
	return tok, info, nil
}

// Session returns a live session; touch restarts its idle timeout
// (gateway.Sessions).
func (s *Service) Session(_ context.Context, token string, touch bool) (auth.SessionInfo, error) {
	info, err := s.sessions.Lookup(token, touch)
	if errors.Is(err, auth.ErrSessionEnded) {
		return info, fmt.Errorf("%w: %v", gateway.ErrUnauthenticated, err)
	}
	return info, err
}

// Logout ends a session, audited (gateway.Sessions).
func (s *Service) Logout(_ context.Context, token string) error {
	info, err := s.sessions.Lookup(token, false)
	if err == nil {
		s.auditResult(auth.Grant{Principal: info.User, Realm: info.Realm, Origin: "liveview"}, "auth.logout", info.User, "ok", "session "+info.ShortID())
	}
	return s.sessions.Logout(token)
}

// SessionIdleTimeout is the sessions' idle timeout (gateway.Sessions).
func (s *Service) SessionIdleTimeout() time.Duration { return s.sessions.Options().Idle }

// sweepSessions ends expired sessions every minute until ctx ends, so the
// WebSockets of sessions nobody uses close too.
func (s *Service) sweepSessions(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.sessions.Sweep(); err != nil {
				s.log.Error("session sweep failed", slog.Any("err", err))
			} else if n > 0 {
				s.log.Info("sessions expired", slog.Int("count", n))
			}
		}
	}
}

// userErr maps the users' errors of the user name onto the gateway's
// kinds, in the words of the request: `user "bob": password shorter than
// 8 characters` (invalid), `user "bob" already exists` (conflict), `user
// "bob": not found`; the store's own words stay out.
func userErr(name string, err error) error {
	switch {
	case errors.Is(err, auth.ErrInvalidUser):
		return gateway.Errorf(gateway.ErrInvalid, "%s", strings.TrimPrefix(err.Error(), auth.ErrInvalidUser.Error()+": "))
	case errors.Is(err, auth.ErrUserExists):
		return gateway.Errorf(gateway.ErrConflict, "user %q already exists", name)
	case errors.Is(err, auth.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("user %q: %w", name, gateway.ErrNotFound)
	}
	return err
}

// ListUsers lists the users, never a password hash (gateway.Users).
func (s *Service) ListUsers(context.Context) ([]gateway.User, error) {
	us, err := s.users.List()
	if err != nil {
		return nil, err
	}
	out := make([]gateway.User, len(us))
	for i, u := range us {
		out[i] = gateway.User{Name: u.Name, Realm: u.Realm, Level: u.Level, Permissions: u.Permissions,
			Disabled: u.Disabled, Created: u.Created, Changed: u.Changed}
	}
	return out, nil
}

// AddUser creates a user g covers (auth.Grant.CoversUser), audited
// (gateway.Users). The request's own faults are answered first, so a
// refusal never hides them: an invalid name, realm, level or permission
// and a password out of bounds (ErrInvalid), then a name in use
// (ErrConflict); only then whether g may create such a user.
func (s *Service) AddUser(_ context.Context, g auth.Grant, nu gateway.NewUser) error {
	u := auth.UserRecord{Name: nu.Name, Realm: nu.Realm, Level: nu.Level, Permissions: nu.Permissions}
	if err := auth.CheckUser(u); err != nil {
		return userErr(nu.Name, err)
	}
	if err := auth.CheckPassword(nu.Name, nu.Password); err != nil {
		return userErr(nu.Name, err)
	}
	if _, err := s.users.User(nu.Name); err == nil {
		return userErr(nu.Name, auth.ErrUserExists)
	}
	if err := g.CoversUser(nu.Name, nu.Realm, nu.Level, nu.Permissions); err != nil {
		return err
	}
	if err := s.users.Add(u, nu.Password); err != nil {
		return userErr(nu.Name, err)
	}
	var perms []string
	for _, p := range nu.Permissions {
		perms = append(perms, string(p))
	}
	level := ""
	if nu.Level != auth.LevelNone {
		level = nu.Level.String()
	}
	s.auditAdmin(g, "user.add", nu.Name, map[string]any{"realm": string(nu.Realm), "level": level, "permissions": perms})
	return nil
}

// SetPassword replaces a password and ends the user's sessions at once,
// audited (gateway.Users). An unknown user (ErrNotFound) and a password
// out of bounds (ErrInvalid) come first. Then g must cover the user
// (auth.Grant.CoversUser), as for creating it: whoever sets a password
// can log in as the user, so setting the password of a user who can do
// more than g would widen g (docs/security.md, "Who may manage a user").
func (s *Service) SetPassword(_ context.Context, g auth.Grant, name, password string) error {
	u, err := s.users.User(name)
	if err != nil {
		return userErr(name, err)
	}
	if err := auth.CheckPassword(name, password); err != nil {
		return userErr(name, err)
	}
	if err := g.CoversUser(name, u.Realm, u.Level, u.Permissions); err != nil {
		return err
	}
	if err := s.users.SetPassword(name, password); err != nil {
		return userErr(name, err)
	}
	n, err := s.sessions.RevokeUser(name)
	s.auditAdmin(g, "user.passwd", name, map[string]any{"sessions_ended": n})
	return err
}

// DisableUser disables a user and ends its sessions at once, audited; a
// user already disabled is reported as such (gateway.Users).
func (s *Service) DisableUser(_ context.Context, g auth.Grant, name string) (bool, error) {
	u, err := s.users.User(name)
	if err != nil {
		return false, userErr(name, err)
	}
	if u.Disabled {
		return true, nil
	}
	if err := s.users.Disable(name); err != nil {
		return false, userErr(name, err)
	}
	n, err := s.sessions.RevokeUser(name)
	s.auditAdmin(g, "user.disable", name, map[string]any{"sessions_ended": n})
	return false, err
}

// Provision creates the platform user "admin" with every permission and
// the given password, then revokes the bootstrap token for good (memory,
// store and file). Only the bootstrap token's grant may call it
// (gateway.Users).
func (s *Service) Provision(_ context.Context, g auth.Grant, password string) error {
	if g.Realm != auth.RealmBootstrap {
		return &auth.DeniedError{Kind: "permission", Need: "the bootstrap token", Target: "provision"}
	}
	admin := auth.UserRecord{Name: AdminUser, Realm: auth.RealmPlatform, Permissions: slices.Clone(auth.AllPermissions)}
	if err := s.users.Add(admin, password); err != nil {
		return userErr(AdminUser, err)
	}
	if err := s.db.PutMeta(metaBootstrapHash, []byte{}); err != nil {
		return fmt.Errorf("provision: revoke the bootstrap token: %w", err)
	}
	s.keys.SetBootstrapHash(nil)
	path := filepath.Join(s.opts.DataDir, BootstrapTokenFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("bootstrap token file not removed (the token is revoked anyway)", slog.String("file", path), slog.Any("err", err))
	}
	s.auditAdmin(g, "provision", AdminUser, map[string]any{"bootstrap_token": "revoked"})
	s.log.Info("provisioned: admin password set, bootstrap token revoked")
	return nil
}

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

// seeded is one seed user of the project, and where it is written.
type seeded struct {
	user  auth.UserRecord
	where string // "FILE:LINE: users[i]"
}

// parseUsers decodes the project's seed users; every bad one is reported
// with the file and line.
func parseUsers(p *config.Project) ([]seeded, error) {
	var out []seeded
	var errs []error
	for i := range p.Users {
		n := &p.Users[i]
		where := fmt.Sprintf("%s:%d: users[%d]", p.File, n.Line, i)
		if n.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s: want a mapping", where))
			continue
		}
		bad := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j]; !slices.Contains(seedKeys, k.Value) {
				errs = append(errs, fmt.Errorf("%s:%d: unknown key %q (want %s)", p.File, k.Line, k.Value, strings.Join(seedKeys, ", ")))
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
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		u.Hash = su.PasswordHash
		out = append(out, seeded{user: u, where: where})
	}
	return out, errors.Join(errs...)
}

// checkUsers checks the project's seed users as seedUsers seeds them,
// without seeding: a bad one would stop the next start.
func checkUsers(p *config.Project) error {
	_, err := parseUsers(p)
	return err
}

// seedUsers creates the project's seed users whose names are free.
func (s *Service) seedUsers() error {
	us, err := parseUsers(s.Project())
	errs := []error{err}
	for _, su := range us {
		created, err := s.users.Seed(su.user)
		if created {
			s.log.Info("seed user created", slog.String("user", su.user.Name), slog.String("realm", string(su.user.Realm)))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", su.where, err))
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
