package api

import (
	"context"
	"errors"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// ErrConflict means the request would create something that exists (a user
// name): 409, kind "conflict".
var ErrConflict = errors.New("already exists")

// SessionManager is the browser session service (issue 7): password login
// with rate limits, server-side sessions, logout. The daemon passes an
// adapter over auth.Users and auth.Sessions that also audits logins.
type SessionManager interface {
	// Login checks user and password sent from addr (the client's IP) and
	// starts a session: the token (the cookie value) and the session. A
	// wrong name or password wraps ErrUnauthenticated; a lockout is an
	// *auth.RateLimitedError (429 with Retry-After).
	Login(ctx context.Context, user, password, addr string) (string, auth.SessionInfo, error)
	// Session returns the live session of token; touch restarts its idle
	// timeout. An unknown, ended or expired session wraps
	// ErrUnauthenticated; any other error is a 503.
	Session(ctx context.Context, token string, touch bool) (auth.SessionInfo, error)
	// Logout ends the session of token (its WebSockets close).
	Logout(ctx context.Context, token string) error
	// IdleTimeout is the sessions' idle timeout, for the login answer.
	IdleTimeout() time.Duration
}

// UserAdmin manages users (DESIGN.md route table: /users... needs
// users_admin). g is the caller's grant, for the audit trail.
type UserAdmin interface {
	// ListUsers lists every user, never a password hash.
	ListUsers(ctx context.Context) ([]apitypes.UserInfo, error)
	// AddUser creates a user: ErrInvalid (naming the field) or ErrConflict
	// for a name in use.
	AddUser(ctx context.Context, g auth.Grant, req apitypes.UserRequest) error
	// SetPassword replaces a password and ends the user's sessions at once:
	// ErrNotFound, ErrInvalid.
	SetPassword(ctx context.Context, g auth.Grant, name, password string) error
	// DisableUser disables a user and ends its sessions at once (open
	// WebSockets close): ErrNotFound.
	DisableUser(ctx context.Context, g auth.Grant, name string) error
}

// LiveView is the project's panels as the API sees them, and their audit
// trail.
type LiveView interface {
	// Views returns the project's views (parsed by package api/liveview).
	Views(ctx context.Context) []apitypes.View
	// Exposed reports whether the script module lists entry in its
	// `liveview` list (checked again at every press, beside the view).
	Exposed(module, entry string) bool
	// EscapeHatch reports whether QUBIQ_BROWSER_SCRIPT_SCOPES=off is in
	// force: scripts started from a panel then run unrestricted, and each
	// such run is audited as widened.
	EscapeHatch() bool
	// CanAudit reports (nil) whether an audit record can be queued now; a
	// press is refused when it cannot (DESIGN.md, Audit: fail closed).
	CanAudit() error
	// Audit queues one record of a panel action.
	Audit(ctx context.Context, ev PanelAudit) error
	// PanelEvents returns up to limit recent audit records whose origin is
	// the panel, newest first.
	PanelEvents(ctx context.Context, panel string, limit int) ([]apitypes.PanelEvent, error)
}

// PanelAudit is one audit record of a LiveView action: who (Grant's
// principal and realm), from which panel (Grant's origin,
// "liveview:<panel>"), what (Action "liveview.press", Target the entry),
// the result ("ok" or a problem kind) with its detail, and After: the JSON
// detail (entry, args, the grant the script ran with, whether the escape
// hatch widened it, the session's short id, the duration).
type PanelAudit struct {
	Grant  auth.Grant
	Action string
	Target string
	Result string
	Detail string
	After  any
}

// LiveValues feeds the live-value WebSocket.
type LiveValues interface {
	// SubscribeValues delivers every change of the tags g may read, until
	// cancel. dropped counts the changes lost because the subscriber fell
	// behind (the WebSocket then sends a fresh snapshot).
	SubscribeValues(g auth.Grant, buf int) (ch <-chan apitypes.TagValue, dropped func() uint64, cancel func())
}
