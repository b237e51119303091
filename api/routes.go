package api

import (
	"net/http"
	"time"

	"qubiq.dev/edge/auth"
)

// need is what a route requires of the caller's grant: nothing (public), a
// scope, or a permission (DESIGN.md, route table).
type need struct {
	scope auth.Scope
	perm  auth.Permission
}

var public = need{}

func scope(s auth.Scope) need     { return need{scope: s} }
func perm(p auth.Permission) need { return need{perm: p} }

func (n need) isPublic() bool { return n.scope == "" && n.perm == "" }

// String names the need as DESIGN.md's route table does: "nothing",
// "tag:read", "designer".
func (n need) String() string {
	switch {
	case n.scope != "":
		return string(n.scope)
	case n.perm != "":
		return string(n.perm)
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
	}
	return true
}

// String names the dependency for the 501 detail.
func (x dep) String() string {
	return [...]string{"none", "tags", "scripts", "API keys", "health", "devices", "provisioning"}[x]
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
	handle    handlerFunc
}

// pattern is the ServeMux pattern: "POST /api/v1/tags/read".
func (rt route) pattern() string { return rt.method + " " + rt.path }

// prefix is the path prefix of every route of the REST API.
const prefix = "/api/v1"

// routes is THE route table (DESIGN.md, REST, "Routes and what they need";
// STYLE.md rule 12): every route the server answers, with what it needs.
// The middleware (Server.wrap) enforces need, dep, bodyLimit and longWrite;
// handlers never check them again. routes_test.go checks each need against
// DESIGN.md's table (testdata/routes.md).
var routes = []route{
	{method: "GET", path: prefix + "/health", need: public, dep: depHealth, handle: (*Server).health},

	{method: "GET", path: prefix + "/tags", need: scope(auth.TagRead), dep: depTags, handle: (*Server).listTags},
	{method: "POST", path: prefix + "/tags/read", need: scope(auth.TagRead), dep: depTags, handle: (*Server).readTags},
	// Each tag's write level is checked by Tags.WriteTags (per-tag results).
	{method: "POST", path: prefix + "/tags/write", need: scope(auth.TagWrite), dep: depTags, handle: (*Server).writeTags},

	{method: "GET", path: prefix + "/scripts", need: perm(auth.Designer), dep: depScripts, handle: (*Server).listScripts},
	{method: "POST", path: prefix + "/scripts/lint", need: perm(auth.Designer), dep: depScripts, handle: (*Server).lintScript},
	{method: "PUT", path: prefix + "/scripts/{module}", need: perm(auth.Designer), dep: depScripts, handle: (*Server).saveScript},
	{method: "POST", path: prefix + "/scripts/{module}/{entry}/run", need: scope(auth.ScriptExecute), dep: depScripts,
		longWrite: true, handle: (*Server).runScript},

	{method: "GET", path: prefix + "/devices", need: scope(auth.TagRead), dep: depDevices, handle: (*Server).listDevices},

	{method: "POST", path: prefix + "/apikeys", need: perm(auth.UsersAdmin), dep: depAPIKeys, handle: (*Server).createAPIKey},
	{method: "GET", path: prefix + "/apikeys", need: perm(auth.UsersAdmin), dep: depAPIKeys, handle: (*Server).listAPIKeys},
	{method: "DELETE", path: prefix + "/apikeys/{id}", need: perm(auth.UsersAdmin), dep: depAPIKeys, handle: (*Server).revokeAPIKey},

	// DESIGN.md: "firmware (provision: the bootstrap token)"; the bootstrap
	// token holds every permission, and Provisioner decides the rest.
	{method: "POST", path: prefix + "/provision", need: perm(auth.Firmware), dep: depProvision, handle: (*Server).provision},
}

// defaultLongWrite is Config.LongWriteTimeout's default: the longest script
// timeout python.gateway_timeout allows (10 min), plus a margin.
const defaultLongWrite = 10*time.Minute + 30*time.Second
