// Package api serves the QUBIQ Edge REST API under /api/v1 (DESIGN.md,
// "REST"): one route table (routes.go) names each route's method, pattern,
// the scope or permission it needs and its body limit, and one middleware
// enforces it (STYLE.md rule 12). Handlers decode JSON strictly, call the
// daemon's services through the small interfaces of Deps, and answer errors
// as application/problem+json.
//
// # Dependencies
//
// api imports auth, value and api/apitypes. It must not import device,
// sandbox, store or tagengine (deps_test.go): every service it calls is an
// interface defined here (Authenticator, Tags, Scripts, APIKeys, Health,
// Devices, Provisioner), and the daemon passes adapters over the concrete
// subsystems. Only the daemon imports api.
//
// # Errors from dependencies
//
// A dependency signals what went wrong by wrapping a sentinel of this package
// or returning a typed error; the server maps it to a status:
//
//	ErrUnauthenticated   401 (with WWW-Authenticate: Bearer)
//	*auth.DeniedError    403, the detail names the scope, level or permission
//	ErrInvalid           400
//	ErrNotFound          404
//	ErrUnavailable       503 (with Retry-After: 1)
//	ScriptError          by kind (see ScriptError)
//	anything else        500; the error is logged, not sent
package api
