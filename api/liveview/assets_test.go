package liveview

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestAssets_NoExternalHost: the panel runs on plants without internet, so
// no asset names another host (no CDN, no web font, no remote image).
func TestAssets_NoExternalHost(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Assets(), p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := external.FindString(line); m != "" {
				t.Errorf("%s:%d names another host (%s): the panel must work air-gapped", p, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAssets_ModulesResolveAndAreServed: every module the page loads and
// every import between modules is an embedded file, served as JavaScript
// (a module with the wrong MIME type does not run).
func TestAssets_ModulesResolveAndAreServed(t *testing.T) {
	imp := regexp.MustCompile(`(?m)^import .* from '\./([^']+)';$|<script type="module" src="([^"]+)">`)
	h := Handler()
	seen := map[string]bool{}
	queue := []string{"index.html"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		b, err := fs.ReadFile(Assets(), p)
		if err != nil {
			t.Fatalf("%s is loaded but not embedded: %v", p, err)
		}
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			dep := m[1] + m[2]
			if !seen[dep] {
				seen[dep] = true
				queue = append(queue, dep)
			}
		}
	}
	for _, want := range []string{"app.js", "net.js", "widgets.js", "trend.js", "axis.js", "alarms.js", "quality.js", "ui.js", "state.js"} {
		if !seen[want] {
			t.Errorf("%s is not reached from index.html", want)
		}
	}
	for p := range seen {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+p, nil))
		if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") {
			t.Errorf("GET %s: %d %q, want 200 JavaScript", p, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}
