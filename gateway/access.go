package gateway

import (
	"context"
	"time"

	"qubiq.dev/edge/auth"
)

// Credentials are the API keys and the bootstrap token.
type Credentials interface {
	// Authenticate returns the grant of a bearer token: an API key's, or
	// the bootstrap token's (every permission and scope at level design).
	// An unknown, revoked, malformed or expired token wraps
	// ErrUnauthenticated; any other error means the check itself failed.
	Authenticate(ctx context.Context, bearer string) (auth.Grant, error)
	// CreateAPIKey issues a key on behalf of g, never wider than g
	// (auth.Grant.Covers: a refusal is an *auth.DeniedError of kind
	// "wider" naming what, and g's prefixes), and audits it. The token is
	// returned this once and never stored in clear.
	CreateAPIKey(ctx context.Context, g auth.Grant, req NewAPIKey) (APIKeyCreated, error)
	// ListAPIKeys lists the keys that are not revoked, never their tokens.
	ListAPIKeys(ctx context.Context) ([]APIKey, error)
	// RevokeAPIKey revokes the key id on behalf of g (audited); scripts
	// running with it are refused their next system.* call. A key already
	// revoked stays so and is reported (already true, nothing audited):
	// the call is idempotent but says what happened. An unknown id wraps
	// ErrNotFound.
	RevokeAPIKey(ctx context.Context, g auth.Grant, id string) (already bool, err error)
}

// NewAPIKey is what a new API key may do: scopes, write level,
// permissions, the tag path prefixes it is limited to (whole segments;
// none: every path) and when it expires (zero: never).
type NewAPIKey struct {
	Name        string
	Scopes      []auth.Scope
	WriteLevel  auth.Level
	Permissions []auth.Permission
	Prefixes    []string
	Expires     time.Time
}

// APIKeyCreated is a new key's id and its token, shown once.
type APIKeyCreated struct {
	ID    string
	Token string
}

// APIKey is a stored key, without its token.
type APIKey struct {
	ID          string
	Name        string
	Scopes      []auth.Scope
	WriteLevel  auth.Level
	Permissions []auth.Permission
	Prefixes    []string
	Expires     time.Time // zero: never
	Created     time.Time
}

// Sessions are the browser sessions of LiveView and the console:
// password login with rate limits, server-side sessions, logout. Logins,
// their refusals and logouts are audited.
type Sessions interface {
	// Login checks user and password sent from addr (the client's IP) and
	// starts a session: its token (shown this once) and the session. A
	// wrong name or password wraps ErrUnauthenticated; a lockout is an
	// *auth.RateLimitedError.
	Login(ctx context.Context, user, password, addr string) (token string, info auth.SessionInfo, err error)
	// Session returns the live session of token; touch restarts its idle
	// timeout. An unknown, ended or expired session wraps
	// ErrUnauthenticated; any other error means the check failed.
	Session(ctx context.Context, token string, touch bool) (auth.SessionInfo, error)
	// Logout ends the session of token (its Done channel closes).
	Logout(ctx context.Context, token string) error
	// SessionIdleTimeout is the sessions' idle timeout.
	SessionIdleTimeout() time.Duration
}

// Users administers the users of sessions, and provisions the first admin.
// Every change is audited; a password change or a disable ends the user's
// sessions at once. A users_admin may not create or manage a user whose
// sessions would hold more than its own grant (auth.Grant.CoversUser),
// nor set such a user's password (whoever sets it can log in as the user;
// docs/security.md, "Who may manage a user"). The request's own faults
// are answered before that refusal.
type Users interface {
	// ListUsers lists every user, never a password hash.
	ListUsers(ctx context.Context) ([]User, error)
	// AddUser creates a user: ErrInvalid naming the bad field or the
	// short password, then ErrConflict for a name in use, then an
	// *auth.DeniedError when g does not cover it.
	AddUser(ctx context.Context, g auth.Grant, u NewUser) error
	// SetPassword replaces a user's password: ErrNotFound, ErrInvalid,
	// then an *auth.DeniedError when g does not cover the user.
	SetPassword(ctx context.Context, g auth.Grant, name, password string) error
	// DisableUser disables a user: ErrNotFound. A user already disabled
	// stays so and is reported (already true, nothing audited).
	DisableUser(ctx context.Context, g auth.Grant, name string) (already bool, err error)
	// Provision sets the first admin password (the platform user "admin"
	// with every permission) and revokes the bootstrap token for good.
	// Only the bootstrap token's grant may call it (else an
	// *auth.DeniedError).
	Provision(ctx context.Context, g auth.Grant, password string) error
}

// User is a user as administrators see it.
type User struct {
	Name        string
	Realm       auth.Realm
	Level       auth.Level // an operator's level; LevelNone otherwise
	Permissions []auth.Permission
	Disabled    bool
	Created     time.Time
	Changed     time.Time
}

// NewUser is a user to create: a platform user (Designer, with
// permissions) or an operator (with a level: view, operate or supervise),
// and the password.
type NewUser struct {
	Name        string
	Realm       auth.Realm
	Level       auth.Level
	Permissions []auth.Permission
	Password    string
}
