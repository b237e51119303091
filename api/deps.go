package api

import (
	"context"
	"encoding/json"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Sentinel errors the server maps to a status (see the package doc). They
// are the service layer's (package gateway), so a dependency wraps either
// name.
var (
	// ErrUnauthenticated: 401 with WWW-Authenticate: Bearer. Authenticate
	// returns it for an unknown, revoked, malformed or expired credential;
	// any other error of Authenticate is a 503 (the credential could not
	// be checked), never a 401.
	ErrUnauthenticated = gateway.ErrUnauthenticated
	// ErrInvalid: 400, kind "invalid"; the error text is the detail, so it
	// names the bad value.
	ErrInvalid = gateway.ErrInvalid
	// ErrNotFound: 404, kind "not_found".
	ErrNotFound = gateway.ErrNotFound
	// ErrUnavailable: 503, kind "unavailable", Retry-After: 1.
	ErrUnavailable = gateway.ErrUnavailable
	// ErrConflict: 409, kind "conflict" (a user name in use, another
	// package operation running, a stale script version).
	ErrConflict = gateway.ErrConflict
)

// Deps are the parts of the service layer the routes call: each field is
// the subset of gateway.Gateway its routes use (DepsFrom fills every one
// from one gateway.Gateway; a test fills what it exercises). A nil field
// disables its routes: they answer 501 (kind "not_implemented").
// Authenticator nil makes every route that needs credentials answer 501.
type Deps struct {
	// Refusals, when set, records every request the middleware refuses for
	// a missing scope or permission (one audit record per refusal).
	Refusals RefusalAuditor
	// CredentialRefusals, when set, records every request refused for its
	// bearer token (missing, unknown, revoked, expired), aggregated per
	// client address and reason by the service.
	CredentialRefusals CredentialRefusalAuditor
	// Audit lists the audit log (GET /api/v1/audit, users_admin).
	Audit AuditLog

	// Metrics serves GET /api/v1/metrics and counts every answered
	// request by route pattern and status code (routes_metrics.go).
	Metrics Metrics

	Auth      Authenticator
	Tags      Tags
	Scripts   Scripts
	APIKeys   APIKeys
	Health    gateway.Health
	Devices   Devices
	Provision Provisioner

	// Sessions, Users, LiveView and Live serve the browser side: LiveView
	// sessions, user administration, the project's views with their audit
	// trail, and live values for the WebSocket.
	Sessions gateway.Sessions
	Users    UserAdmin
	LiveView LiveView
	Live     LiveValues
	// Data serves the data routes: named queries, history, vars, files,
	// messages.
	Data Data
	// Sandbox serves the script sandbox's administration: /sandbox/...
	Sandbox gateway.Packages
	// Project serves project and tag import/export and device browsing.
	Project ProjectAdmin
	// Certs serves the OPC UA certificate stores: /devices/{name}/certs...
	Certs DeviceCerts
	// Flows serves the flows: /flows... (the flow engine, which the
	// daemon passes; DepsFrom leaves it nil).
	Flows gateway.Flows
	// ScriptCodes and AuditSearch serve the routes the console added
	// (routes_console.go): a module's stored source by version, and the
	// audit search.
	ScriptCodes gateway.ScriptCodes
	AuditSearch gateway.AuditSearcher
	// Alarms serves the alarm routes and the WebSocket's alarm messages
	// (routes_alarms.go, ws.go).
	Alarms gateway.Alarms
	// Appliance serves flashing, the slots' state, backup, restore and the
	// log level (routes_firmware.go); the daemon passes it, DepsFrom
	// leaves it nil.
	Appliance gateway.Appliance
	// TLS describes the listener's certificate for GET /health ("tls");
	// nil when the listener speaks plain HTTP.
	TLS *apitypes.TLSInfo
}

// DepsFrom fills every service-backed field of Deps from gw, and LiveView
// from the panels (NewLiveView over gw's audit log). TLS stays for the
// caller.
func DepsFrom(gw gateway.Gateway, panels Panels) Deps {
	return Deps{Refusals: gw, CredentialRefusals: gw, Audit: gw, Auth: gw, Tags: gw, Scripts: gw, APIKeys: gw, Health: gw, Devices: gw,
		Provision: gw, Sessions: gw, Users: gw, LiveView: NewLiveView(panels, gw), Live: gw, Data: gw,
		Sandbox: gw, Project: gw, Certs: gw, ScriptCodes: gw, AuditSearch: gw, Alarms: gw}
}

// Authenticator turns a bearer token into the grant it stands for
// (gateway.Credentials). The server also answers 401 for a grant that is
// expired (auth.Grant.Expired), whatever Authenticate says.
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (auth.Grant, error)
}

// Tags is the part of gateway.Tags the tag routes use: list, read, write.
// An error of WriteTags refuses the whole call and means nothing was
// written: the server answers 503 "nothing was written ... retry", unless
// the error wraps ErrInvalid or is an *auth.DeniedError.
type Tags interface {
	ListTags(ctx context.Context, g auth.Grant) []gateway.TagInfo
	ReadTags(ctx context.Context, g auth.Grant, paths []string) []gateway.TagValue
	WriteTags(ctx context.Context, g auth.Grant, writes []gateway.TagWrite) ([]gateway.WriteResult, error)
}

// LiveValues feeds the live-value WebSocket (gateway.Tags).
type LiveValues interface {
	SubscribeValues(g auth.Grant, buf int) (ch <-chan gateway.TagValue, dropped func() uint64, cancel func())
}

// Scripts is the part of gateway.Scripts the script routes use. Failures
// of a script (it timed out, raised, was refused) come back as a
// *gateway.ScriptError, answered by its kind (scriptStatus).
type Scripts interface {
	SaveScript(ctx context.Context, g auth.Grant, src gateway.ScriptSource) (gateway.ScriptSaved, error)
	RollbackScript(ctx context.Context, g auth.Grant, module string) (gateway.ScriptSaved, error)
	ScriptVersions(ctx context.Context, g auth.Grant, module string) ([]gateway.ScriptVersion, error)
	RunScript(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (gateway.ScriptRun, error)
	ListScripts(ctx context.Context, g auth.Grant) ([]gateway.ScriptInfo, error)
	LintScript(ctx context.Context, code string) (gateway.LintResult, error)
}

// APIKeys manages API keys (gateway.Credentials). The server validates a
// request before calling CreateAPIKey (known scopes, permissions and
// level, well-formed prefixes, a future expiry) and refuses with 403
// anything beyond the creator's grant (auth.Grant.Covers); the service
// checks again.
type APIKeys interface {
	CreateAPIKey(ctx context.Context, g auth.Grant, req gateway.NewAPIKey) (gateway.APIKeyCreated, error)
	ListAPIKeys(ctx context.Context) ([]gateway.APIKey, error)
	RevokeAPIKey(ctx context.Context, g auth.Grant, id string) (already bool, err error)
}

// Devices lists the project's devices and their scan plans
// (gateway.Devices).
type Devices interface {
	ListDevices(ctx context.Context) []gateway.DeviceInfo
	Device(ctx context.Context, name string) (gateway.DeviceInfo, error)
	DevicePlan(ctx context.Context, name string) ([]gateway.PlannedRequest, error)
}

// Provisioner sets the first admin password and revokes the bootstrap token
// (gateway.Users).
type Provisioner interface {
	Provision(ctx context.Context, g auth.Grant, password string) error
}

// UserAdmin manages users (gateway.Users; /users... needs users_admin).
type UserAdmin interface {
	ListUsers(ctx context.Context) ([]gateway.User, error)
	AddUser(ctx context.Context, g auth.Grant, u gateway.NewUser) error
	SetPassword(ctx context.Context, g auth.Grant, name, password string) error
	DisableUser(ctx context.Context, g auth.Grant, name string) (already bool, err error)
}

// RefusalAuditor records a refused request: the caller's grant, the route
// ("POST /api/v1/tags/write") and why (gateway.Audit). It must not block.
type RefusalAuditor interface {
	AuditRefusal(ctx context.Context, g auth.Grant, target string, reason error)
}

// CredentialRefusalAuditor records a request refused for its credentials
// (gateway.Audit.AuditCredentialRefusal). It must not block.
type CredentialRefusalAuditor interface {
	AuditCredentialRefusal(ctx context.Context, source, target, reason string)
}

// AuditLog lists audit records in commit order (gateway.Audit).
type AuditLog interface {
	AuditRecords(ctx context.Context, after uint64, limit int, q gateway.AuditQuery) ([]gateway.AuditRecord, error)
}

// Data is the part of gateway.Data the data routes use (/db/named,
// /history, /vars, /files, /messages), with the same scopes as scripts
// (checked by the route table) and the same audit.
type Data interface {
	RunNamedQuery(ctx context.Context, g auth.Grant, q gateway.NamedQuery) (json.RawMessage, error)
	History(ctx context.Context, g auth.Grant, q gateway.HistoryQuery) ([]gateway.HistorySeries, error)
	GetVar(ctx context.Context, g auth.Grant, key string) (json.RawMessage, error)
	SetVar(ctx context.Context, g auth.Grant, key string, v json.RawMessage) error
	DeleteVar(ctx context.Context, g auth.Grant, key string) error
	IncrVar(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error)
	ReadFile(ctx context.Context, g auth.Grant, path string, offset, length int64) ([]byte, error)
	SaveFile(ctx context.Context, g auth.Grant, path string, data []byte) error
	DeleteFile(ctx context.Context, g auth.Grant, path string) error
	SendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (gateway.ScriptRun, error)
	MaxFileBytes() int64
}

// ProjectAdmin is the project as the project routes see it
// (gateway.Project) and device browsing (gateway.Devices). An import is
// all or nothing: on any problem it returns a *gateway.ProjectError (400
// with every problem and its line) and applies nothing.
type ProjectAdmin interface {
	ImportProject(ctx context.Context, g auth.Grant, doc []byte) (gateway.ProjectChanges, error)
	ExportProject(ctx context.Context) ([]byte, error)
	ImportTags(ctx context.Context, g auth.Grant, format string, doc []byte) (gateway.ProjectChanges, error)
	ExportTags(ctx context.Context, format string) ([]byte, error)
	BrowseDevice(ctx context.Context, g auth.Grant, name, node string) ([]gateway.BrowseNode, error)
}

// DeviceCerts is the certificate store of the project's OPC UA devices
// (gateway.Devices). Thumbprints are 40 lower-case hex digits (the server
// normalises and checks them before calling).
type DeviceCerts interface {
	ListCerts(ctx context.Context, device string) ([]gateway.DeviceCert, error)
	TrustCert(ctx context.Context, g auth.Grant, device, thumbprint string) (gateway.DeviceCert, error)
	RejectCert(ctx context.Context, g auth.Grant, device, thumbprint string) (gateway.DeviceCert, error)
}

// PanelAudit is the part of gateway.Audit a panel press needs.
type PanelAudit interface {
	CanAudit() error
	Audit(ctx context.Context, g auth.Grant, ev gateway.AuditEvent) error
	AuditTrail(ctx context.Context, origin string, limit int) ([]gateway.AuditRecord, error)
}

// idleTimeout is the sessions' idle timeout, for the login answer.
func (s *Server) idleTimeout() time.Duration { return s.deps.Sessions.SessionIdleTimeout() }
