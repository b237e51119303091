package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPI_EveryRouteDocumented: every route of the route table has its
// entry in openapiOps (api/openapi_routes.go), and every entry is a route.
// The failure names each missing route and the line to add, so routes
// added elsewhere are documented at merge time with one edit.
func TestOpenAPI_EveryRouteDocumented(t *testing.T) {
	ops := openAPIOps()
	seen := map[string]bool{}
	for _, rt := range routes {
		seen[rt.pattern()] = true
		spec, ok := ops[rt.pattern()]
		if !ok {
			t.Errorf("route %q (needs %s) is missing from the OpenAPI document: add to openapiOps in api/openapi_routes.go\n\t%q: {summary: \"...\", req: at.X{}, resp: at.Y{}},",
				rt.pattern(), rt.need, rt.pattern())
			continue
		}
		if spec.summary == "" {
			t.Errorf("route %q: its openapiOps entry has no summary", rt.pattern())
		}
		if spec.req != nil && spec.reqMedia != "" || spec.resp != nil && spec.respMedia != "" {
			t.Errorf("route %q: a body is JSON (req/resp) or another media type, not both", rt.pattern())
		}
	}
	var stale []string
	for p := range ops {
		if !seen[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(stale)
	for _, p := range stale {
		t.Errorf("openapiOps has %q, which is not a route of the route table: remove it or fix its pattern", p)
	}
}

// TestOpenAPI_Served: GET /api/v1/openapi.json needs no credentials and
// answers an OpenAPI 3.1 document in which every route of the table is an
// operation with the need of the route table, its request body (JSON
// routes: the schema of the type the entry names, with its fields), its
// success answer, and only references that resolve.
func TestOpenAPI_Served(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do(t, "GET", "/api/v1/openapi.json", "", "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json without credentials: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)
	ops := openAPIOps()
	for _, rt := range routes {
		p, params := openapiPath(rt.path)
		item, _ := paths[p].(map[string]any)
		op, ok := item[strings.ToLower(rt.method)].(map[string]any)
		if !ok {
			t.Errorf("%s: no operation %s %s in the document", rt.pattern(), rt.method, p)
			continue
		}
		if got := op["x-qubiq-need"]; got != rt.need.String() {
			t.Errorf("%s: x-qubiq-need %v, want the route table's %q", rt.pattern(), got, rt.need)
		}
		sec, _ := op["security"].([]any)
		if rt.need.isPublic() != (len(sec) == 0) {
			t.Errorf("%s: security %v for need %q", rt.pattern(), sec, rt.need)
		}
		var got []string
		pl, _ := op["parameters"].([]any)
		for _, x := range pl {
			if m := x.(map[string]any); m["in"] == "path" {
				got = append(got, m["name"].(string))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(params) {
			t.Errorf("%s: path parameters %v, want %v", rt.pattern(), got, params)
		}
		spec := ops[rt.pattern()]
		rb, hasBody := op["requestBody"].(map[string]any)
		if (spec.req != nil || spec.reqMedia != "") != hasBody {
			t.Errorf("%s: requestBody %v, want one exactly when the entry names a body", rt.pattern(), rb)
		}
		if spec.req != nil {
			schema := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			checkFields(t, rt.pattern()+" request", doc, schema, reflect.TypeOf(spec.req))
		}
		resps := op["responses"].(map[string]any)
		if _, ok := resps["default"]; !ok || len(resps) != 2 {
			t.Errorf("%s: responses %v, want the success answer and the default problem", rt.pattern(), resps)
		}
		if spec.resp != nil {
			for code, r := range resps {
				if code == "default" {
					continue
				}
				schema := r.(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
				checkFields(t, rt.pattern()+" answer", doc, schema, reflect.TypeOf(spec.resp))
			}
		}
	}
	// Every $ref resolves.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if resolve(doc, ref) == nil {
					t.Errorf("$ref %q does not resolve", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

// resolve returns the object a local $ref names, or nil.
func resolve(doc map[string]any, ref string) map[string]any {
	cur := any(doc)
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	m, _ := cur.(map[string]any)
	return m
}

// checkFields: a struct's schema lists exactly the JSON names its fields
// decode from (structFields, the strict decoder's own view), so the
// document and the decoder agree on the shape.
func checkFields(t *testing.T, what string, doc, schema map[string]any, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		if items, ok := schema["items"].(map[string]any); ok {
			schema = items
		}
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || special[typ] != nil {
		return
	}
	if ref, ok := schema["$ref"].(string); ok {
		schema = resolve(doc, ref)
	}
	props, _ := schema["properties"].(map[string]any)
	var got, want []string
	for k := range props {
		got = append(got, k)
	}
	for k := range structFields(typ) {
		want = append(want, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: schema properties %v, want the fields %v of %s", what, got, want, typ)
	}
}

// TestOpenAPI_WSMessageSchema: the schema GET /api/v1/ws's summary names
// exists: WSMessage is one of the message schemas, whose "type" values are
// every client message type the server decodes and every type it sends,
// each once.
func TestOpenAPI_WSMessageSchema(t *testing.T) {
	doc := buildOpenAPI(routes, openapiOps)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	if !strings.Contains(openapiOps["GET /api/v1/ws"].summary, "WSMessage") {
		t.Fatalf("the WebSocket route's summary no longer names WSMessage: %q", openapiOps["GET /api/v1/ws"].summary)
	}
	ws, ok := schemas["WSMessage"].(map[string]any)
	if !ok {
		t.Fatal("no WSMessage schema")
	}
	var got []string
	for _, r := range ws["oneOf"].([]any) {
		name := strings.TrimPrefix(r.(map[string]any)["$ref"].(string), "#/components/schemas/")
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Fatalf("WSMessage names %q, which is no schema", name)
		}
		got = append(got, s["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]string)...)
	}
	var want []string
	for _, m := range wsRequestFields {
		want = append(want, m.typ)
	}
	want = append(want, "values", "heartbeat", "error", "alarm", "alarm_summary")
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WSMessage types %v; want %v", got, want)
	}
}
