package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
)

//go:embed static dist
var embedded embed.FS

// assets is what Handler serves: the embedded files (tests swap it).
var assets fs.FS = embedded

// Bundle is the file name of the esbuild bundle in dist/ (console.js),
// written by `make console`.
const Bundle = "console.js"

// bundleFiles are the files of dist/ that are served: the bundle and the
// licences of the npm packages in it (build.mjs writes both).
var bundleFiles = map[string]bool{Bundle: true, "LICENSES.txt": true}

// Built reports whether the binary holds the bundle (dist/console.js): false
// for a binary built with plain `go build` before `make console` ran.
func Built() bool {
	_, err := fs.Stat(assets, "dist/"+Bundle)
	return err == nil
}

// contentSecurityPolicy allows nothing but the daemon itself: no inline
// script, no other origin, no framing. Style elements need the page's
// nonce: CodeMirror puts its styles in one <style> element that carries it
// (EditorView.cspNonce); its inline positions are CSSOM writes, which
// style-src does not restrict.
func contentSecurityPolicy(nonce string) string {
	style := "'self'"
	if nonce != "" {
		style += " 'nonce-" + nonce + "'"
	}
	return "default-src 'none'; script-src 'self'; style-src " + style + "; img-src 'self' data:; " +
		"font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// noncePlaceholder is replaced in index.html by each answer's nonce (a
// <meta name="csp-nonce"> the bundle reads).
const noncePlaceholder = "{{CSP_NONCE}}"

// newNonce returns 128 random bits in base64 (CSP Level 3: a nonce is
// unguessable and new for each response).
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(b[:])
}

// Handler serves the console under the path it is given: "/" (and
// "/index.html") is the console's page with a new CSP nonce, or, when the
// bundle is missing (Built is false), a 503 page that says so and how to
// build it; the static files and the bundle's files by their names;
// anything else 404. Every answer carries the console's security headers.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := path.Clean("/" + r.URL.Path)[1:]
		if name != "" && name != "index.html" {
			h.Set("Content-Security-Policy", contentSecurityPolicy(""))
		}
		switch {
		case name == "" || name == "index.html":
			if !Built() {
				h.Set("Content-Security-Policy", contentSecurityPolicy(""))
				serveFile(w, r, "static/missing.html", http.StatusServiceUnavailable, nil)
				return
			}
			nonce := newNonce()
			h.Set("Content-Security-Policy", contentSecurityPolicy(nonce))
			h.Set("Cache-Control", "no-store") // the nonce is this answer's only
			serveFile(w, r, "static/index.html", http.StatusOK, func(b []byte) []byte {
				return bytes.ReplaceAll(b, []byte(noncePlaceholder), []byte(nonce))
			})
		case bundleFiles[name]:
			serveFile(w, r, "dist/"+name, http.StatusOK, nil)
		case name != "missing.html" && path.Dir(name) == ".":
			serveFile(w, r, "static/"+name, http.StatusOK, nil)
		default:
			http.NotFound(w, r)
		}
	})
}

// serveFile answers the embedded file name with status (its bytes passed
// through edit when not nil), or 404 when the binary lacks it.
func serveFile(w http.ResponseWriter, r *http.Request, name string, status int, edit func([]byte) []byte) {
	b, err := fs.ReadFile(assets, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if edit != nil {
		b = edit(b)
	}
	if ct := contentType(name); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b) // a client that went away needs no answer
	}
}

// contentType is the media type of the console's kinds of file.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".map", ".json":
		return "application/json"
	case ".txt":
		return "text/plain; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return ""
}
