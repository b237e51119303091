package api

import (
	"context"
	"encoding/json"
	"errors"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// Sentinel errors a dependency wraps (with %w and its subject) to choose the
// status of the answer. See the package documentation for the mapping.
var (
	// ErrUnauthenticated means the bearer credential is unknown, revoked,
	// malformed or expired: 401 with WWW-Authenticate: Bearer. Authenticator
	// returns it; any other Authenticator error is a 503 (the credential
	// could not be checked), never a 401.
	ErrUnauthenticated = errors.New("unauthenticated")

	// ErrInvalid means the request is well-formed JSON but its content is
	// not acceptable (unknown scope, bad module name, ...): 400, kind
	// "invalid". The error text is the detail, so it must name the bad value.
	ErrInvalid = errors.New("invalid request")

	// ErrNotFound means the request names something that does not exist
	// (an API key id, a script module): 404, kind "not_found".
	ErrNotFound = errors.New("not found")

	// ErrUnavailable means the service could not answer now and the caller
	// should retry (store busy, a write-level lookup failed): 503, kind
	// "unavailable", Retry-After: 1.
	ErrUnavailable = errors.New("temporarily unavailable")
)

// Deps are the services the API calls. A nil field disables its routes: they
// answer 501 (kind "not_implemented"). Authenticator nil makes every route
// that needs credentials answer 501.
type Deps struct {
	// Refusals, when set, records every request the middleware refuses for
	// a missing scope or permission (DESIGN.md, Audit: one record per
	// refusal).
	Refusals RefusalAuditor
	// Audit lists the audit log (GET /api/v1/audit, users_admin).
	Audit AuditLog

	Auth      Authenticator
	Tags      Tags
	Scripts   Scripts
	APIKeys   APIKeys
	Health    Health
	Devices   Devices
	Provision Provisioner

	// Sessions, Users, LiveView and Live serve the browser side (issue 7;
	// liveview_deps.go): LiveView sessions, user administration, the
	// project's views with their audit trail, and live values for the
	// WebSocket.
	Sessions SessionManager
	Users    UserAdmin
	LiveView LiveView
	Live     LiveValues
	// Data serves the system.* data routes (issue 4; data_deps.go):
	// named queries, history, vars, files, messages.
	Data    Data
	Sandbox SandboxAdmin // script sandbox administration: /sandbox/... (routes_sandbox.go)
	// Project serves project and tag import/export and device browsing
	// (issues 5 and 6; routes_project.go).
	Project ProjectAdmin
	// Certs serves the OPC UA certificate stores: /devices/{name}/certs...
	// (issue 6; certs.go, routes_certs.go).
	Certs DeviceCerts
	// TLS describes the listener's certificate for GET /health ("tls");
	// nil when the listener speaks plain HTTP.
	TLS *apitypes.TLSInfo
}

// Authenticator turns a bearer token into the grant it stands for (API key,
// session or the bootstrap token). It returns an error wrapping
// ErrUnauthenticated for an unknown, revoked or malformed token; any other
// error means the check itself failed (503). The server also answers 401 for
// a grant whose Expires has passed, whatever Authenticate says.
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (auth.Grant, error)
}

// Tags is the tag engine as the API sees it. g is the caller's grant; the
// implementation applies its prefixes (a path outside them reads and writes
// as Bad_UserAccessDenied) and its write level against each tag's level.
type Tags interface {
	// ListTags returns the tags g may see (inside its prefixes).
	ListTags(ctx context.Context, g auth.Grant) []apitypes.TagInfo

	// ReadTags returns one TagValue per path, in order. An unknown path
	// is Bad_NodeIdUnknown, a path outside g's prefixes
	// Bad_UserAccessDenied (DESIGN.md, Quality).
	ReadTags(ctx context.Context, g auth.Grant, paths []string) []apitypes.TagValue

	// WriteTags checks each write against g (scope, prefixes, the tag's
	// write level) and writes those allowed, returning one WriteResult per
	// write, in order; Status is "Good" when written. An error refuses the
	// whole call and means nothing was written (a failed write-level
	// lookup, DESIGN.md "Levels, realms, scopes, grants"): the server
	// answers 503 kind "unavailable" saying to retry, unless the error
	// wraps ErrInvalid or is an *auth.DeniedError.
	WriteTags(ctx context.Context, g auth.Grant, writes []apitypes.TagWrite) ([]apitypes.WriteResult, error)
}

// Scripts is the script store and sandbox as the API sees it. Failures of a
// script (it timed out, raised, was refused) come back as a ScriptError.
type Scripts interface {
	// SaveScript stores code as the next version of module, checked and
	// linted (names beginning with "__" refused, @gateway timeouts read
	// from the AST and clamped).
	SaveScript(ctx context.Context, g auth.Grant, module, code string) (apitypes.ScriptSaved, error)

	// RunScript runs module.entry with args (JSON, "null" when none) under
	// g, until it returns or its timeout.
	RunScript(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (apitypes.ScriptRun, error)

	// ListScripts lists the saved modules.
	ListScripts(ctx context.Context, g auth.Grant) ([]apitypes.ScriptInfo, error)

	// LintScript lints code with ruff, or a syntax-only check without it.
	LintScript(ctx context.Context, code string) (apitypes.LintResult, error)
}

// ScriptError is how Scripts reports a run or save that did not return
// normally (DESIGN.md, REST, POST /scripts/{module}/{entry}/run). Kind
// chooses the status:
//
//	timeout                504
//	permission_denied      403
//	runtime_missing        503
//	busy                   503, with Retry-After: 1
//	memory_limit_exceeded  500
//	killed                 500
//	script_error           422 (the script raised; Detail has the exception and line)
//	invalid                400
//	not_found              404 (no such module or entry)
//	anything else          500
//
// Detail is sent as the problem's detail, Kind as its kind.
type ScriptError interface {
	error
	Kind() string
	Detail() string
}

// APIKeys manages API keys. The server validates a request before calling
// CreateAPIKey (known scopes, permissions and level, well-formed prefixes, a
// future expiry) and refuses with 403 anything beyond the creator's grant;
// the implementation may check again and wraps ErrInvalid for what it
// refuses.
type APIKeys interface {
	// CreateAPIKey creates a key on behalf of g; the token is returned this
	// once.
	CreateAPIKey(ctx context.Context, g auth.Grant, req apitypes.APIKeyRequest) (apitypes.APIKeyCreated, error)
	// ListAPIKeys lists the keys, never their tokens.
	ListAPIKeys(ctx context.Context) ([]apitypes.APIKeyInfo, error)
	// RevokeAPIKey revokes the key id; an unknown id wraps ErrNotFound.
	RevokeAPIKey(ctx context.Context, id string) error
}

// Health reports the daemon's health (DESIGN.md, REST, GET /health). The
// server answers 200 for "ok" and "degraded", 503 for "failed", with the same
// body.
type Health interface {
	Health(ctx context.Context) apitypes.Health
}

// Devices lists the project's devices and their state.
type Devices interface {
	ListDevices(ctx context.Context) []apitypes.DeviceInfo
	// DevicePlan returns the requests one scan of the named device sends
	// (Modbus request planning), per scan class; an unknown device wraps
	// ErrNotFound, a driver without planning returns an empty list.
	DevicePlan(ctx context.Context, name string) ([]apitypes.PlannedRequest, error)
}

// Provisioner sets the first admin password and revokes the bootstrap token
// (DESIGN.md, "Credentials on first start"). g is the caller's grant; the
// implementation decides whether it is the bootstrap token's.
type Provisioner interface {
	Provision(ctx context.Context, g auth.Grant, password string) error
}

// RefusalAuditor records a refused request: the caller's grant, the route
// ("POST /api/v1/tags/write") and why (a *auth.DeniedError naming the
// missing scope or permission). It must not block.
type RefusalAuditor interface {
	AuditRefusal(ctx context.Context, g auth.Grant, target string, reason error)
}

// AuditLog lists audit records in commit order: those after sequence number
// after, at most limit (the implementation caps it).
type AuditLog interface {
	AuditRecords(ctx context.Context, after uint64, limit int) ([]apitypes.AuditRecord, error)
}
