// Package api is the REST front door of QUBIQ Edge, under /api/v1, and the
// LiveView panels it serves (README: REST): one route table (routes.go)
// names each route's method, pattern, the scope or permission it needs and
// its body limit, and one middleware enforces it. A handler decodes the
// request strictly, makes one call of the service layer (package gateway)
// and translates the answer to the wire types of api/apitypes (wire.go);
// errors are answered as application/problem+json.
//
// Every JSON body, and every message a client sends on the WebSocket, is
// decoded by one strict decoder (decode.go, jsoncheck.go): a body must come
// as Content-Type: application/json (else 415), be UTF-8, hold no key
// twice, and name fields exactly (docs/api.md, "Request bodies"). The
// OpenAPI 3.1 document at GET /api/v1/openapi.json is generated from the
// route table and the wire types (openapi.go; one entry per route in
// openapi_routes.go).
//
// # Dependencies
//
// api imports auth, value, gateway, api/apitypes and api/liveview. It must
// not import the service layer's implementation, the tag engine, the
// store, the sandbox, a driver or the config (deps_test.go): each field of
// Deps is the part of gateway.Gateway its routes use, and the daemon fills
// them all from one gateway.Gateway (DepsFrom). Only the daemon imports
// api.
//
// # Errors from the service layer
//
// The service layer signals what went wrong by wrapping a sentinel of
// package gateway (re-exported here under the same names) or returning a
// typed error; the server maps it to a status:
//
//	ErrUnauthenticated       401 (with WWW-Authenticate: Bearer)
//	*auth.DeniedError        403, the detail names the scope, level or permission
//	ErrInvalid               400
//	ErrNotFound              404
//	ErrConflict              409
//	ErrInstallFailed         502
//	ErrUnavailable           503 (with Retry-After: 1)
//	*gateway.ScriptError     by kind (scriptStatus)
//	*gateway.ProjectError    400 with every problem (import routes)
//	*gateway.WideningError   409 with the widenings (sandbox routes)
//	anything else            500; the error is logged, not sent
package api
