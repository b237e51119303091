package liveview

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Assets returns the panel's files (index.html, app.css, app.js), embedded
// in the binary.
func Assets() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil { // "static" is embedded above; this cannot fail
		panic(err)
	}
	return sub
}

// contentSecurityPolicy allows nothing but the daemon itself: no inline
// script, no other origin, no framing (the panel is never embedded, so a
// click-jacking page cannot press its buttons).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the assets under the path it is given ("/" is
// index.html), with the security headers of the panel.
func Handler() http.Handler {
	files := http.FileServerFS(Assets())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		p := path.Clean("/" + r.URL.Path)
		if p != "/" && !strings.Contains(p[1:], "/") {
			if _, err := fs.Stat(Assets(), p[1:]); err != nil {
				http.NotFound(w, r)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}
