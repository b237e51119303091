package console

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// withAssets serves fs in place of the embedded files for one test.
func withAssets(t *testing.T, files fstest.MapFS) {
	t.Helper()
	old := assets
	assets = files
	t.Cleanup(func() { assets = old })
}

func get(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec
}

var page = fstest.MapFS{
	"static/index.html":   {Data: []byte(`<meta name="csp-nonce" content="{{CSP_NONCE}}"><script type="module" src="console.js"></script>`)},
	"static/missing.html": {Data: []byte(`<h1>The console is not built into this binary</h1>`)},
	"static/console.css":  {Data: []byte(`body{}`)},
	"dist/README.md":      {Data: []byte(`generated`)},
}

func built() fstest.MapFS {
	fs := fstest.MapFS{"dist/console.js": {Data: []byte(`console.log(1)`)}, "dist/LICENSES.txt": {Data: []byte(`MIT`)}}
	for k, v := range page {
		fs[k] = v
	}
	return fs
}

// A binary built without the bundle (plain go build) says so at /console/
// with a 503, instead of a page whose script is missing.
func TestHandler_WithoutBundle_SaysSo(t *testing.T) {
	withAssets(t, page)
	if Built() {
		t.Fatal("Built() without dist/console.js")
	}
	rec := get(t, "/")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not built") {
		t.Fatalf("GET / without the bundle: %d %s", rec.Code, rec.Body)
	}
	if rec := get(t, "/console.js"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /console.js without the bundle: %d", rec.Code)
	}
}

// With the bundle, the page carries a fresh nonce that the CSP names for
// style elements (CodeMirror's), and nothing but 'self' otherwise.
func TestHandler_Page_NonceAndPolicy(t *testing.T) {
	withAssets(t, built())
	if !Built() {
		t.Fatal("Built() false with dist/console.js")
	}
	nonceRE := regexp.MustCompile(`content="([A-Za-z0-9+/=]{24})"`)
	var nonces []string
	for range 2 {
		rec := get(t, "/")
		m := nonceRE.FindStringSubmatch(rec.Body.String())
		if rec.Code != 200 || m == nil {
			t.Fatalf("GET /: %d %s", rec.Code, rec.Body)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "style-src 'self' 'nonce-"+m[1]+"'") || !strings.Contains(csp, "script-src 'self';") ||
			!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("CSP %q does not hold the page's nonce %s and only 'self'", csp, m[1])
		}
		if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("headers %v", rec.Header())
		}
		nonces = append(nonces, m[1])
	}
	if nonces[0] == nonces[1] {
		t.Errorf("the nonce %s was served twice", nonces[0])
	}
}

func TestHandler_Files(t *testing.T) {
	withAssets(t, built())
	for _, tc := range []struct {
		path string
		code int
		ct   string
	}{
		{"/console.js", 200, "text/javascript; charset=utf-8"},
		{"/console.css", 200, "text/css; charset=utf-8"},
		{"/LICENSES.txt", 200, "text/plain; charset=utf-8"},
		{"/index.html", 200, "text/html; charset=utf-8"},
		{"/README.md", 404, ""},    // dist/'s README is not served
		{"/missing.html", 404, ""}, // the missing-bundle page only stands in for the page
		{"/../assets.go", 404, ""}, // nothing outside the assets
		{"/static/console.css", 404, ""},
		{"/nosuch.js", 404, ""},
	} {
		rec := get(t, tc.path)
		if rec.Code != tc.code || (tc.ct != "" && rec.Header().Get("Content-Type") != tc.ct) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.code, tc.ct)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s lacks the security headers: %v", tc.path, rec.Header())
		}
	}
}

// The embedded tree always has what a plain go build needs: the page, the
// missing-bundle page and the styles.
func TestEmbedded_HasStaticFiles(t *testing.T) {
	for _, f := range []string{"static/index.html", "static/missing.html", "static/console.css", "dist/README.md"} {
		if _, err := embedded.ReadFile(f); err != nil {
			t.Errorf("embedded %s: %v", f, err)
		}
	}
	b, _ := embedded.ReadFile("static/index.html")
	if !strings.Contains(string(b), noncePlaceholder) {
		t.Errorf("index.html has no %s for the CSP nonce", noncePlaceholder)
	}
}

// The warning at the install button is the documentation's text, word for
// word (docs/console.md, "What a package brings").
func TestWideningWarning_IsTheDocumentation(t *testing.T) {
	src, err := os.ReadFile("src/pages/sandbox.js")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/console.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)export const WIDENING_WARNING = \[(.*?)\];`).FindSubmatch(src)
	if block == nil {
		t.Fatal("no WIDENING_WARNING in src/pages/sandbox.js")
	}
	paras := regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`).FindAllSubmatch(block[1], -1)
	if len(paras) != 3 {
		t.Fatalf("WIDENING_WARNING has %d paragraphs, want 3", len(paras))
	}
	for _, p := range paras {
		text := strings.ReplaceAll(string(p[1]), `\'`, "'")
		if !strings.Contains(string(doc), "> "+text+"\n") {
			t.Errorf("docs/console.md does not quote the warning's paragraph %q", text)
		}
	}
	for _, must := range []string{"numpy re-exports ctypes", "Pickle loaders", "pandas reads and writes files by any path"} {
		if !strings.Contains(string(block[1]), must) {
			t.Errorf("the warning does not say %q", must)
		}
	}
}
