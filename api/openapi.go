package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// The OpenAPI 3.1 document of the REST API (docs/api.md, "OpenAPI"),
// served at GET /api/v1/openapi.json. It is generated, not hand-written:
// the paths, methods and what each route needs come from the route table
// itself (routes, the one home of that rule, enforced by the middleware),
// and the request and answer schemas from the Go wire types the handlers
// decode and encode (api/apitypes), so the document cannot disagree with
// the server about either. The one hand-kept part is openapiOps
// (openapi_routes.go): per route, a summary and which wire types it takes
// and answers, one entry per route; openapi_test.go fails naming every
// route without one.

// opSpec is one route's entry of openapiOps.
type opSpec struct {
	summary string
	// req is a value of the JSON request body's type (nil: no JSON body);
	// reqMedia names a body of another media type instead
	// ("application/octet-stream", "text/csv").
	req      any
	reqMedia string
	// optionalBody: the body may be left out (a run without args).
	optionalBody bool
	// resp is a value of the JSON answer's type; respMedia names an answer
	// of another media type. Neither: no content (status 204).
	resp      any
	respMedia string
	// respLine, with respMedia NDJSON, is a value of each line's type.
	respLine any
	// status is the success status; 0 is 200, or 204 without resp.
	status int
	// query lists the query parameters: "name: description".
	query []string
}

// openAPIOps returns openapiOps: a function so tests can check it.
func openAPIOps() map[string]opSpec { return openapiOps }

var (
	openapiOnce sync.Once
	openapiDoc  []byte
	openapiErr  error
)

// openapiRoutes serve the document (the route table: GET /openapi.json
// needs nothing).
var openapiRoutes = []route{
	{method: "GET", path: prefix + "/openapi.json", need: public, handle: (*Server).openapi},
}

func init() { routes = append(routes, openapiRoutes...) }

func (s *Server) openapi(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	openapiOnce.Do(func() { openapiDoc, openapiErr = json.Marshal(buildOpenAPI(routes, openapiOps)) })
	if openapiErr != nil {
		return openapiErr
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openapiDoc)
	return nil
}

// openapiPath turns a ServeMux pattern's path into an OpenAPI path
// ("{path...}" is "{path}") and lists its parameters.
func openapiPath(p string) (string, []string) {
	var params []string
	parts := strings.Split(p, "/")
	for i, seg := range parts {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			name := strings.TrimSuffix(strings.Trim(seg, "{}"), "...")
			params = append(params, name)
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/"), params
}

// buildOpenAPI is the document of rts, with the entries of ops.
func buildOpenAPI(rts []route, ops map[string]opSpec) map[string]any {
	sg := &schemaGen{defs: map[string]any{}, names: map[reflect.Type]string{}}
	paths := map[string]map[string]any{}
	for _, rt := range rts {
		spec := ops[rt.pattern()]
		p, params := openapiPath(rt.path)
		op := map[string]any{
			"operationId":  operationID(rt),
			"summary":      spec.summary,
			"x-qubiq-need": rt.need.String(),
			"responses":    map[string]any{},
		}
		if spec.summary == "" {
			op["summary"] = rt.pattern()
		}
		switch {
		case rt.need.isPublic():
			op["security"] = []any{}
		case rt.need.session:
			op["security"] = []any{map[string]any{"session": []any{}}}
		default:
			op["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}}
		}
		var ps []any
		for _, name := range params {
			ps = append(ps, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range spec.query {
			name, desc, _ := strings.Cut(q, ":")
			ps = append(ps, map[string]any{"name": strings.TrimSpace(name), "in": "query", "description": strings.TrimSpace(desc),
				"schema": map[string]any{"type": "string"}})
		}
		if len(ps) > 0 {
			op["parameters"] = ps
		}
		switch {
		case spec.req != nil:
			op["requestBody"] = map[string]any{"required": !spec.optionalBody,
				"content": map[string]any{"application/json": map[string]any{"schema": sg.of(reflect.TypeOf(spec.req))}}}
		case spec.reqMedia != "":
			op["requestBody"] = map[string]any{"required": true,
				"content": map[string]any{spec.reqMedia: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		}
		status := spec.status
		answer := map[string]any{"description": "the answer"}
		switch {
		case spec.resp != nil:
			answer["content"] = map[string]any{"application/json": map[string]any{"schema": sg.of(reflect.TypeOf(spec.resp))}}
		case spec.respMedia != "":
			media := map[string]any{"schema": map[string]any{"type": "string"}}
			if spec.respLine != nil {
				media["x-qubiq-line-schema"] = sg.of(reflect.TypeOf(spec.respLine)) // each line is one JSON value of it
			}
			answer["content"] = map[string]any{spec.respMedia: media}
		case status == 0:
			status = http.StatusNoContent
			answer["description"] = "done, no content"
		}
		if status == 0 {
			status = http.StatusOK
		}
		resps := op["responses"].(map[string]any)
		resps[fmt.Sprint(status)] = answer
		resps["default"] = map[string]any{"$ref": "#/components/responses/problem"}
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		paths[p][strings.ToLower(rt.method)] = op
	}
	problem := sg.of(reflect.TypeFor[apitypes.Problem]())
	wsSchemas(sg)
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "QUBIQ Edge REST API", "version": "1",
			"description": "Every route of qubiqd's REST API, generated from its route table: x-qubiq-need is what a route needs " +
				"(a scope, a permission, a session, or nothing). JSON bodies are sent as application/json (else 415), UTF-8, " +
				"without duplicate keys, field names matched exactly (docs/api.md)."},
		"paths": paths,
		"components": map[string]any{
			"schemas": sg.defs,
			"responses": map[string]any{"problem": map[string]any{"description": "an error (RFC 9457 problem details)",
				"content": map[string]any{apitypes.ProblemContentType: map[string]any{"schema": problem}}}},
			"securitySchemes": map[string]any{
				"bearer":  map[string]any{"type": "http", "scheme": "bearer", "description": "an API key (qbq_...) or the bootstrap token"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": SessionCookie, "description": "a browser session (POST /api/v1/auth/login); state-changing requests also send X-CSRF-Token"},
			},
		},
	}
}

// wsMessageTypes are the "type"s of each WebSocket message schema
// (docs/api.md, "WebSocket").
var wsMessageTypes = []struct {
	name  string
	t     reflect.Type
	types []string
	desc  string
}{
	{"WSSubscribe", reflect.TypeFor[apitypes.WSSubscribe](), []string{"subscribe"},
		"client to server: replace the subscription with paths; answered with a values snapshot"},
	{"WSControl", reflect.TypeFor[apitypes.WSControl](), []string{"activity", "subscribe_alarms", "unsubscribe_alarms"},
		"client to server: activity restarts a browser session's idle timeout; subscribe_alarms, unsubscribe_alarms (alarm:read)"},
	{"WSServerMessage", reflect.TypeFor[apitypes.WSMessage](), []string{"values", "heartbeat", "error"},
		"server to client: values (a snapshot or changes), heartbeat (time, every 5 s), error (reason: a refused message, or why the socket closes)"},
	{"WSAlarm", reflect.TypeFor[apitypes.WSAlarm](), []string{"alarm"},
		"server to client: an alarm's transition, or with snapshot true a current alarm"},
	{"WSAlarmSummary", reflect.TypeFor[apitypes.WSAlarmSummary](), []string{"alarm_summary"},
		"server to client: the counts after each batch of alarm messages"},
}

// wsSchemas adds the WebSocket's messages to sg's schemas, each with its
// "type" values, and WSMessage, any one of them (GET /api/v1/ws names
// it), told apart by "type".
func wsSchemas(sg *schemaGen) {
	var refs []any
	for _, m := range wsMessageTypes {
		sg.names[m.t] = m.name
		obj := sg.object(m.t)
		obj["description"] = m.desc
		obj["properties"].(map[string]any)["type"] = map[string]any{"type": "string", "enum": m.types}
		sg.defs[m.name] = obj
		refs = append(refs, map[string]any{"$ref": "#/components/schemas/" + m.name})
	}
	sg.defs["WSMessage"] = map[string]any{"oneOf": refs,
		"description": "a message of the WebSocket GET /api/v1/ws, one JSON text message each, told apart by type (docs/api.md, \"WebSocket\")"}
}

// operationID names a route's operation uniquely: "post_api_v1_tags_write".
func operationID(rt route) string {
	p, _ := openapiPath(rt.path)
	r := strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_", "-", "_")
	return strings.ToLower(rt.method) + r.Replace(p)
}

// schemaGen makes JSON Schemas (2020-12, as OpenAPI 3.1 uses) of Go wire
// types as encoding/json encodes them; named structs go to defs.
type schemaGen struct {
	defs  map[string]any
	names map[reflect.Type]string
}

var (
	timeType   = reflect.TypeFor[time.Time]()
	numberType = reflect.TypeFor[json.Number]()
)

// special are the wire types whose JSON is not their Go fields'.
var special = map[reflect.Type]map[string]any{
	rawMessageType:                  {"description": "any JSON value"},
	numberType:                      {"type": "number"},
	timeType:                        {"type": "string", "format": "date-time"},
	reflect.TypeFor[value.BigInt](): {"type": "integer"},
	reflect.TypeFor[apitypes.TagValue](): {"type": "object", "required": []string{"path", "value", "quality", "timestamp"},
		"properties": map[string]any{"path": map[string]any{"type": "string"},
			"value":            map[string]any{"description": "the value (number, bool, string, array), null when the quality is not Good and none is known"},
			"quality":          map[string]any{"type": "string", "description": "a quality name: Good, Bad_NotConnected, ..."},
			"timestamp":        map[string]any{"type": "string", "format": "date-time"},
			"reason":           map[string]any{"type": "string"},
			"status_code":      map[string]any{"type": "integer"},
			"server_timestamp": map[string]any{"type": "string", "format": "date-time"}}},
	reflect.TypeFor[apitypes.TagWrite](): {"type": "object", "required": []string{"path", "value"}, "additionalProperties": false,
		"properties": map[string]any{"path": map[string]any{"type": "string"}, "value": map[string]any{"description": "the value to write"}}},
	reflect.TypeFor[apitypes.HistoryPoint](): {"type": "object", "required": []string{"timestamp", "value", "quality"},
		"properties": map[string]any{"timestamp": map[string]any{"type": "string", "format": "date-time"},
			"value": map[string]any{}, "quality": map[string]any{"type": "string"}, "status_code": map[string]any{"type": "integer"}}},
}

// of returns the schema of t: a $ref for a named struct, else inline.
func (g *schemaGen) of(t reflect.Type) map[string]any {
	if s, ok := special[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.Interface:
		return map[string]any{}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name, ok := g.names[t]
		if !ok {
			name = t.Name()
			for taken := true; taken; {
				taken = false
				for _, n := range g.names {
					if n == name {
						name, taken = name+"_", true
						break
					}
				}
			}
			g.names[t] = name
			g.defs[name] = map[string]any{} // placeholder against recursion
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// object is the schema of a struct's JSON object: its fields as
// encoding/json names them (structFields); those without omitempty or
// omitzero are required.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	g.fields(t, props, &required)
	sort.Strings(required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := props[name]; ok {
			continue // an outer field wins
		}
		props[name] = g.of(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}
