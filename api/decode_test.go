package api

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// strictRoute is a JSON route whose handler decodes into T with
// decodeBody, for the decoder's own tests.
func strictRoute[T any](t *testing.T, allowEmpty bool) (http.Handler, *T) {
	t.Helper()
	e := newEnv(t, Config{})
	var got T
	rt := route{method: "POST", path: "/x", need: scope(auth.TagRead),
		handle: func(s *Server, w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
			if err := decodeBody(r, &got, decodeOpts{allowEmpty: allowEmpty}); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}}
	return e.srv.wrap(rt), &got
}

func post(h http.Handler, contentType, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokFull)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestDecode_InvalidUTF8RefusedNamingTheField(t *testing.T) {
	h, _ := strictRoute[struct {
		Value  json.RawMessage     `json:"value"`
		Writes []apitypes.TagWrite `json:"writes"`
		Args   map[string]any      `json:"args"`
	}](t, false)
	for _, tt := range []struct{ name, body, want string }{
		{"raw value (PUT /vars)", "{\"value\": \"ok\xff\"}", `field "value": invalid UTF-8`},
		{"nested in an array", "{\"value\": [1, {\"a\": \"\xc3\x28\"}]}", `field "value[1].a": invalid UTF-8`},
		{"a tag path", "{\"writes\": [{\"path\": \"L\xe2\x82\", \"value\": 1}]}", `field "writes[0].path": invalid UTF-8`},
		{"a key", "{\"args\": {\"k\xff\": 1}}", `a key in field "args": invalid UTF-8`},
		{"lone high surrogate", `{"value": "\ud800x"}`, `field "value": a lone UTF-16 surrogate`},
		{"lone low surrogate", `{"args": {"k": "\udc00"}}`, `field "args.k": a lone UTF-16 surrogate`},
		{"high then not low", `{"value": "\ud800\u0041"}`, `field "value": a lone UTF-16 surrogate`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := post(h, "application/json", tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400 (%s)", rec.Code, rec.Body)
			}
			if p := problemOf(t, rec); p.Kind != KindInvalid || !strings.Contains(p.Detail, tt.want) {
				t.Errorf("detail %q, want it to contain %q", p.Detail, tt.want)
			}
		})
	}
	// Valid text, escaped pairs and escaped backslashes pass.
	for _, body := range []string{`{"value": "K\u00fchlung \ud83d\ude00 \\ud800"}`, "{\"value\": \"Kühlung\"}"} {
		if rec := post(h, "application/json", body); rec.Code != http.StatusNoContent {
			t.Errorf("body %s: status %d (%s), want 204", body, rec.Code, rec.Body)
		}
	}
}

func TestDecode_DuplicateKeysAndCaseRefused(t *testing.T) {
	h, got := strictRoute[apitypes.WriteRequest](t, false)
	for _, tt := range []struct{ name, body, want string }{
		{"top level", `{"writes": [], "writes": [{"path": "a", "value": 1}]}`, `duplicate key "writes" in the request body`},
		{"in an element", `{"writes": [{"path": "a", "value": 1, "value": 2}]}`, `duplicate key "value" in "writes[0]"`},
		{"inside a value", `{"writes": [{"path": "a", "value": [{"x": 1, "x": 2}]}]}`, `duplicate key "x" in "writes[0].value[0]"`},
		{"field name case", `{"Writes": []}`, `unknown field "Writes" (field names are case-sensitive: did you mean "writes"?)`},
		{"nested field name case", `{"writes": [{"path": "a", "Value": 1}]}`, `unknown field "Value" in "writes[0]" (field names are case-sensitive: did you mean "value"?)`},
		{"unknown field", `{"writes": [], "bogus": 1}`, `unknown field "bogus"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := post(h, "application/json", tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400 (%s)", rec.Code, rec.Body)
			}
			if p := problemOf(t, rec); !strings.Contains(p.Detail, tt.want) {
				t.Errorf("detail %q, want it to contain %q", p.Detail, tt.want)
			}
		})
	}
	if rec := post(h, "application/json", `{"writes": [{"path": "a", "value": 7}]}`); rec.Code != http.StatusNoContent {
		t.Fatalf("a strict body was refused: %d %s", rec.Code, rec.Body)
	}
	if len(got.Writes) != 1 || got.Writes[0].Path != "a" || got.Writes[0].Value != int64(7) {
		t.Fatalf("decoded %+v, want one write of 7 to a", got)
	}
}

func TestDecode_ContentType415(t *testing.T) {
	h, _ := strictRoute[map[string]any](t, false)
	for _, tt := range []struct {
		ct   string
		want int
	}{
		{"", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType}, // curl -d
		{"text/plain", http.StatusUnsupportedMediaType},
		{"application/json; charset=latin1", http.StatusUnsupportedMediaType},
		{"application/jsonx", http.StatusUnsupportedMediaType},
		{"application/json", http.StatusNoContent},
		{"Application/JSON; charset=UTF-8", http.StatusNoContent},
	} {
		rec := post(h, tt.ct, `{"a": 1}`)
		if rec.Code != tt.want {
			t.Errorf("Content-Type %q: status %d, want %d (%s)", tt.ct, rec.Code, tt.want, rec.Body)
			continue
		}
		if tt.want == http.StatusUnsupportedMediaType {
			if p := problemOf(t, rec); p.Kind != KindUnsupportedMedia || !strings.Contains(p.Detail, "application/json") {
				t.Errorf("Content-Type %q: problem %+v", tt.ct, p)
			}
		}
	}
	// An empty body needs no Content-Type where the route allows one
	// (POST .../rollback, a run without args).
	he, _ := strictRoute[map[string]any](t, true)
	if rec := post(he, "", ""); rec.Code != http.StatusNoContent {
		t.Errorf("empty body without Content-Type: %d %s, want 204", rec.Code, rec.Body)
	}
}

// TestDecode_OneDecoder: every JSON route's handler decodes with
// decodeBody (or decodeJSON, for WebSocket messages); no other file of
// the package decodes request data with encoding/json or wsjson.
func TestDecode_OneDecoder(t *testing.T) {
	// The only other use: the flow definition given as a JSON string, in a
	// body decodeBody already checked.
	allowed := map[string]int{"decode.go": -1, "jsoncheck.go": -1, "routes_flows.go": 1}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		ast.Inspect(file, func(nd ast.Node) bool {
			sel, ok := nd.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok {
				switch x.Name + "." + sel.Sel.Name {
				case "json.NewDecoder", "json.Unmarshal", "wsjson.Read":
					n++
					if allowed[f] >= 0 && n > allowed[f] {
						t.Errorf("%s: %s.%s decodes outside the one decoder (decodeBody, decodeJSON)", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
}

// FuzzDecodeBody: whatever the body, the decoder never panics, and a body
// it accepts is one valid JSON text in UTF-8 that re-encodes as valid
// UTF-8.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"paths": ["Line1/Pump/Speed"]}`, `{"writes": [{"path": "a", "value": 1}]}`,
		`{"value": "x", "value": "y"}`, "{\"value\": \"\xff\"}", `{"Paths": []}`, `[[[[]]]]`, `{"value": "\ud800"}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var w apitypes.WriteRequest
		var r apitypes.ReadRequest
		var a any
		for _, dst := range []any{&w, &r, &a} {
			if err := decodeJSON(body, dst); err != nil {
				if _, ok := err.(*httpError); !ok {
					t.Fatalf("decodeJSON(%q) returned %T %v, want an *httpError (a 400)", body, err, err)
				}
				continue
			}
			if !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("decodeJSON accepted %q: not valid UTF-8 JSON", body)
			}
			out, err := json.Marshal(dst)
			if err == nil && !utf8.Valid(out) {
				t.Fatalf("decoded %q re-encodes as invalid UTF-8: %q", body, out)
			}
		}
	})
}
