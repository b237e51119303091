package api

import (
	"net/http"
	"time"

	"qubiq.dev/edge/auth"
)

// need is what a route requires of the caller's grant: nothing (public), a
// scope, or a permission (the route table, testdata/routes.md).
type need struct {
	scope   auth.Scope
	perm    auth.Permission
	session bool // a LiveView session (cookie), whatever its grant
}

var public = need{}

func scope(s auth.Scope) need     { return need{scope: s} }
func perm(p auth.Permission) need { return need{perm: p} }

// aSession is the need of routes only a browser session may call
// (logout, the session's own info).
var aSession = need{session: true}

func (n need) isPublic() bool { return n.scope == "" && n.perm == "" && !n.session }

// String names the need as the contract's route table (testdata/routes.md) does: "nothing",
// "tag:read", "designer".
func (n need) String() string {
	switch {
	case n.scope != "":
		return string(n.scope)
	case n.perm != "":
		return string(n.perm)
	case n.session:
		return "a session"
	}
	return "nothing"
}

// dep names the Deps field a route calls; a nil one makes the route 501.
type dep uint8

const (
	depNone dep = iota
	depTags
	depScripts
	depAPIKeys
	depHealth
	depDevices
	depProvision
	depSessions
	depUsers
	depLiveView
	depLive
	depData
	depAudit
	depMetrics
)

func (d Deps) has(x dep) bool {
	switch x {
	case depTags:
		return d.Tags != nil
	case depScripts:
		return d.Scripts != nil
	case depAPIKeys:
		return d.APIKeys != nil
	case depHealth:
		return d.Health != nil
	case depDevices:
		return d.Devices != nil
	case depProvision:
		return d.Provision != nil
	case depSessions:
		return d.Sessions != nil
	case depUsers:
		return d.Users != nil
	case depLiveView:
		return d.LiveView != nil
	case depLive:
		return d.Live != nil && d.Tags != nil
	case depData:
		return d.Data != nil
	case depAudit:
		return d.Audit != nil
	case depMetrics:
		return d.Metrics != nil
	}
	return true
}

// String names the dependency for the 501 detail.
func (x dep) String() string {
	return [...]string{"none", "tags", "scripts", "API keys", "health", "devices", "provisioning",
		"sessions", "users", "LiveView", "live values", "data services", "audit log", "metrics"}[x]
}

// handlerFunc handles one route. g is the caller's grant (the zero Grant on
// public routes). A returned error is answered as a problem (writeError);
// a handler that returns nil has written its answer.
type handlerFunc func(s *Server, w http.ResponseWriter, r *http.Request, g auth.Grant) error

// route is one row of the route table.
type route struct {
	method string // GET, POST, PUT, DELETE
	path   string // a Go 1.22 ServeMux path pattern: "/api/v1/scripts/{module}/{entry}/run"
	need   need
	dep    dep
	// bodyLimit caps the request body in bytes; 0 means Config.BodyLimit.
	bodyLimit int64
	// longWrite gives the route Config.LongWriteTimeout instead of the
	// server's WriteTimeout (script runs may last up to
	// python.gateway_timeout's max of 10 min).
	longWrite bool
	// stream marks a long-lived connection (the WebSocket): the server's
	// read and write deadlines are lifted; the handler keeps its own.
	stream bool
	// liveview: a LiveView session is not checked against need but
	// against the panel's exposed entries, in the handler (the route table:
	// "POST /scripts/{module}/{entry}/run | script:execute (a LiveView
	// session: see below)").
	liveview bool
	handle   handlerFunc
}

// pattern is the ServeMux pattern: "POST /api/v1/tags/read".
func (rt route) pattern() string { return rt.method + " " + rt.path }

// prefix is the path prefix of every route of the REST API.
const prefix = "/api/v1"

// routes is THE route table (testdata/routes.md, "Routes and what they need";
// enforced once, in middleware): every route the server answers, with what it needs.
// The middleware (Server.wrap) enforces need, dep, bodyLimit and longWrite;
// handlers never check them again. routes_test.go checks each need against
// the contract's route table (testdata/routes.md) (testdata/routes.md).
var routes = []route{
	{method: "GET", path: prefix + "/health", need: public, dep: depHealth, handle: (*Server).health},
	{method: "GET", path: prefix + "/mqtt", need: scope(auth.TagRead), dep: depHealth, handle: (*Server).mqttLink},

	{method: "GET", path: prefix + "/tags", need: scope(auth.TagRead), dep: depTags, handle: (*Server).listTags},
	{method: "POST", path: prefix + "/tags/read", need: scope(auth.TagRead), dep: depTags, handle: (*Server).readTags},
	// Each tag's write level is checked by Tags.WriteTags (per-tag results).
	{method: "POST", path: prefix + "/tags/write", need: scope(auth.TagWrite), dep: depTags, handle: (*Server).writeTags},

	{method: "GET", path: prefix + "/scripts", need: perm(auth.Designer), dep: depScripts, handle: (*Server).listScripts},
	{method: "POST", path: prefix + "/scripts/lint", need: perm(auth.Designer), dep: depScripts, handle: (*Server).lintScript},
	{method: "PUT", path: prefix + "/scripts/{module}", need: perm(auth.Designer), dep: depScripts, handle: (*Server).saveScript},
	{method: "POST", path: prefix + "/scripts/{module}/rollback", need: perm(auth.Designer), dep: depScripts, handle: (*Server).rollbackScript},
	{method: "POST", path: prefix + "/scripts/{module}/{entry}/run", need: scope(auth.ScriptExecute), dep: depScripts,
		longWrite: true, liveview: true, handle: (*Server).runScript},

	{method: "GET", path: prefix + "/devices", need: scope(auth.TagRead), dep: depDevices, handle: (*Server).listDevices},
	{method: "GET", path: prefix + "/devices/{name}", need: scope(auth.TagRead), dep: depDevices, handle: (*Server).getDevice},
	{method: "GET", path: prefix + "/devices/{name}/plan", need: scope(auth.TagRead), dep: depDevices, handle: (*Server).devicePlan},

	{method: "POST", path: prefix + "/apikeys", need: perm(auth.UsersAdmin), dep: depAPIKeys, handle: (*Server).createAPIKey},
	{method: "GET", path: prefix + "/apikeys", need: perm(auth.UsersAdmin), dep: depAPIKeys, handle: (*Server).listAPIKeys},
	{method: "DELETE", path: prefix + "/apikeys/{id}", need: perm(auth.UsersAdmin), dep: depAPIKeys, handle: (*Server).revokeAPIKey},

	// the route table: "firmware (provision: the bootstrap token)"; the bootstrap
	// token holds every permission, and Provisioner decides the rest.
	{method: "POST", path: prefix + "/provision", need: perm(auth.Firmware), dep: depProvision, handle: (*Server).provision},

	// Browser sessions and users (issue 7; session.go, users.go). Login
	// is public but rate-limited and Origin-checked.
	{method: "POST", path: prefix + "/auth/login", need: public, dep: depSessions, handle: (*Server).login},
	{method: "POST", path: prefix + "/auth/logout", need: aSession, dep: depSessions, handle: (*Server).logout},
	{method: "GET", path: prefix + "/auth/session", need: aSession, dep: depSessions, handle: (*Server).sessionInfo},
	{method: "GET", path: prefix + "/users", need: perm(auth.UsersAdmin), dep: depUsers, handle: (*Server).listUsers},
	{method: "POST", path: prefix + "/users", need: perm(auth.UsersAdmin), dep: depUsers, handle: (*Server).addUser},
	{method: "PUT", path: prefix + "/users/{name}/password", need: perm(auth.UsersAdmin), dep: depUsers, handle: (*Server).setPassword},
	{method: "POST", path: prefix + "/users/{name}/disable", need: perm(auth.UsersAdmin), dep: depUsers, handle: (*Server).disableUser},

	// LiveView panels (liveview.go, ws.go).
	{method: "GET", path: prefix + "/ws", need: scope(auth.TagRead), dep: depLive, stream: true, handle: (*Server).ws},
	{method: "GET", path: prefix + "/liveview/views", need: scope(auth.TagRead), dep: depLiveView, handle: (*Server).listViews},
	{method: "GET", path: prefix + "/liveview/views/{panel}/events", need: scope(auth.TagRead), dep: depLiveView, handle: (*Server).panelEvents},
}

func init() { routes = append(routes, dataRoutes...) }    // the system.* data routes (routes_data.go)
func init() { routes = append(routes, sandboxRoutes...) } // sandbox administration (routes_sandbox.go)
func init() { routes = append(routes, projectRoutes...) } // project import/export, device browse (routes_project.go)
func init() { routes = append(routes, metricsRoutes...) } // GET /api/v1/metrics (routes_metrics.go)

// defaultLongWrite is Config.LongWriteTimeout's default: the longest script
// timeout python.gateway_timeout allows (10 min), plus a margin.
const defaultLongWrite = 10*time.Minute + 30*time.Second
