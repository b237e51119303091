package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/client"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// memTags is an in-memory api.Tags: writes land in a map, reads return them.
type memTags struct {
	mu sync.Mutex
	m  map[string]value.Value
}

func (t *memTags) ListTags(context.Context, auth.Grant) []gateway.TagInfo { return nil }

func (t *memTags) ReadTags(_ context.Context, _ auth.Grant, paths []string) []gateway.TagValue {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]gateway.TagValue, len(paths))
	for i, p := range paths {
		out[i] = gateway.TagValue{Path: p, VQT: value.VQT{Value: t.m[p], Quality: value.Good, Time: time.Unix(1, 0)}}
	}
	return out
}

func (t *memTags) WriteTags(_ context.Context, _ auth.Grant, ws []gateway.TagWrite) ([]gateway.WriteResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]gateway.WriteResult, len(ws))
	for i, w := range ws {
		t.m[w.Path] = w.Value
		out[i] = gateway.WriteResult{Path: w.Path, Quality: value.Good}
	}
	return out, nil
}

type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, b string) (auth.Grant, error) {
	if b == "good" {
		return auth.Grant{Principal: "t", Scopes: []auth.Scope{auth.TagRead, auth.TagWrite}, WriteLevel: auth.LevelOperate}, nil
	}
	return auth.Grant{}, api.ErrUnauthenticated
}

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := api.New(api.Config{}, api.Deps{Auth: tokenAuth{}, Tags: &memTags{m: map[string]value.Value{}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestClient_Tags_IntegerExactness round-trips 2^53+1 and the uint64
// maximum through the real server: write, read back, same Go type and value.
func TestClient_Tags_IntegerExactness(t *testing.T) {
	ts := newServer(t)
	c, err := client.New(ts.URL+"/", "good", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vals := map[string]value.Value{"A": int64(9007199254740993), "B": uint64(math.MaxUint64),
		"C": int64(math.MinInt64), "D": []any{uint64(math.MaxUint64), "x", true}}
	var writes []apitypes.TagWrite
	for _, p := range []string{"A", "B", "C", "D"} {
		writes = append(writes, apitypes.TagWrite{Path: p, Value: vals[p]})
	}
	res, err := c.WriteTags(ctx, writes)
	if err != nil || len(res) != 4 || res[1].Status != "Good" {
		t.Fatalf("WriteTags = %+v, %v", res, err)
	}
	got, err := c.ReadTags(ctx, "A", "B", "C", "D")
	if err != nil {
		t.Fatal(err)
	}
	for _, tv := range got {
		want := vals[tv.Path]
		if !value.Equal(tv.Value, want) || fmt.Sprintf("%T", tv.Value) != fmt.Sprintf("%T", want) {
			t.Errorf("%s = %#v (%T), want %#v (%T)", tv.Path, tv.Value, tv.Value, want, want)
		}
		if tv.Quality != "Good" || !tv.Timestamp.Equal(time.Unix(1, 0)) {
			t.Errorf("%s: quality %q timestamp %v", tv.Path, tv.Quality, tv.Timestamp)
		}
	}
}

func TestClient_Do_ProblemError(t *testing.T) {
	ts := newServer(t)
	ctx := context.Background()
	tests := []struct {
		name, key  string
		call       func(c *client.Client) error
		wantStatus int
		wantKind   string
		wantDetail string
	}{
		{"unauthenticated", "bad", func(c *client.Client) error { _, err := c.ListTags(ctx); return err }, 401, "unauthenticated", "invalid, revoked"},
		{"no key", "", func(c *client.Client) error { _, err := c.ReadTags(ctx, "A"); return err }, 401, "unauthenticated", "missing credentials"},
		{"not implemented", "good", func(c *client.Client) error { _, err := c.ListDevices(ctx); return err }, 501, "not_implemented", "GET /api/v1/devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(ts.URL, tt.key, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.call(c)
			var pe *client.ProblemError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *ProblemError", err, err)
			}
			if pe.Status != tt.wantStatus || pe.Kind != tt.wantKind || !strings.Contains(pe.Detail, tt.wantDetail) || pe.Title == "" {
				t.Errorf("ProblemError = %+v", pe)
			}
			if !client.IsKind(err, tt.wantKind) {
				t.Errorf("IsKind(%q) = false", tt.wantKind)
			}
		})
	}
}

func TestClient_Do_NonProblemError(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html>bad gateway</html>")
	}))
	defer ts.Close()
	c, _ := client.New(ts.URL, "k", nil)
	_, err := c.ListDevices(context.Background())
	var pe *client.ProblemError
	if !errors.As(err, &pe) || pe.Status != 502 || pe.Kind != "" || pe.Detail != "<html>bad gateway</html>" {
		t.Fatalf("err = %#v", err)
	}
}

// TestClient_Routes_Requests checks each method's method, path (escaped),
// credential and body against a recording server.
func TestClient_Routes_Requests(t *testing.T) {
	type seen struct{ method, path, auth, body string }
	var got seen
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := new(strings.Builder)
		if r.Body != nil {
			buf := make([]byte, 4096)
			n, _ := r.Body.Read(buf)
			b.Write(buf[:n])
		}
		got = seen{r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), strings.TrimSpace(b.String())}
		switch {
		case r.Method == "DELETE":
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/apikeys") && r.Method == "POST":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":"k1","token":"t"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			if (r.Method == "GET" && !strings.HasSuffix(r.URL.Path, "/health")) || strings.Contains(r.URL.Path, "/tags/") {
				fmt.Fprint(w, `[]`)
			} else {
				fmt.Fprint(w, `{}`)
			}
		}
	}))
	defer ts.Close()
	c, err := client.New(ts.URL+"/prefix", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		call func() error
		want seen
	}{
		{"health", func() error { _, err := c.Health(ctx); return err }, seen{"GET", "/prefix/api/v1/health", "Bearer k", ""}},
		{"list tags", func() error { _, err := c.ListTags(ctx); return err }, seen{"GET", "/prefix/api/v1/tags", "Bearer k", ""}},
		{"read", func() error { _, err := c.ReadTags(ctx); return err }, seen{"POST", "/prefix/api/v1/tags/read", "Bearer k", `{"paths":[]}`}},
		{"write", func() error {
			_, err := c.WriteTags(ctx, []apitypes.TagWrite{{Path: "A/B", Value: uint64(math.MaxUint64)}})
			return err
		}, seen{"POST", "/prefix/api/v1/tags/write", "Bearer k", `{"writes":[{"path":"A/B","value":18446744073709551615}]}`}},
		{"save", func() error { _, err := c.SaveScript(ctx, "pumps", "x=1"); return err }, seen{"PUT", "/prefix/api/v1/scripts/pumps", "Bearer k", `{"code":"x=1"}`}},
		{"run", func() error { _, err := c.RunScript(ctx, "pumps", "start", json.RawMessage(`{"rpm":1}`)); return err },
			seen{"POST", "/prefix/api/v1/scripts/pumps/start/run", "Bearer k", `{"args":{"rpm":1}}`}},
		{"run without args", func() error { _, err := c.RunScript(ctx, "pumps", "start", nil); return err },
			seen{"POST", "/prefix/api/v1/scripts/pumps/start/run", "Bearer k", `{}`}},
		{"lint", func() error { _, err := c.LintScript(ctx, "x"); return err }, seen{"POST", "/prefix/api/v1/scripts/lint", "Bearer k", `{"code":"x"}`}},
		{"list scripts", func() error { _, err := c.ListScripts(ctx); return err }, seen{"GET", "/prefix/api/v1/scripts", "Bearer k", ""}},
		{"create key", func() error {
			_, err := c.CreateAPIKey(ctx, apitypes.APIKeyRequest{Name: "n", WriteLevel: "view", Expires: &exp})
			return err
		}, seen{"POST", "/prefix/api/v1/apikeys", "Bearer k", `{"name":"n","scopes":[],"write_level":"view","expires":"2030-01-01T00:00:00Z"}`}},
		{"list keys", func() error { _, err := c.ListAPIKeys(ctx); return err }, seen{"GET", "/prefix/api/v1/apikeys", "Bearer k", ""}},
		{"revoke escaped", func() error { _, err := c.RevokeAPIKey(ctx, "a/b c"); return err }, seen{"DELETE", "/prefix/api/v1/apikeys/a%2Fb%20c", "Bearer k", ""}},
		{"devices", func() error { _, err := c.ListDevices(ctx); return err }, seen{"GET", "/prefix/api/v1/devices", "Bearer k", ""}},
		{"provision", func() error { return c.Provision(ctx, "pw") }, seen{"POST", "/prefix/api/v1/provision", "Bearer k", `{"password":"pw"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("request = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

func TestClient_Health_Failed503(t *testing.T) {
	s, err := api.New(api.Config{}, api.Deps{Health: failedHealth{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	c, _ := client.New(ts.URL, "", nil)
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "failed" || len(h.Reasons) != 1 {
		t.Fatalf("Health = %+v, %v", h, err)
	}
}

type failedHealth struct{}

func (failedHealth) Health(context.Context) gateway.HealthReport {
	return gateway.HealthReport{Status: "failed", Reasons: []string{"store locked"}}
}

func TestNew_BadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://x/?a=1", "::"} {
		if _, err := client.New(u, "", nil); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

// TestNew_URLWithoutScheme: a host and port without http:// is refused
// with the URL it probably meant.
func TestNew_URLWithoutScheme(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8080", "localhost:8080"} {
		_, err := client.New(u, "", nil)
		if err == nil || !strings.Contains(err.Error(), "did you mean http://"+u) {
			t.Errorf("New(%q) = %v, want a hint naming http://%s", u, err, u)
		}
	}
	if _, err := client.New("http://127.0.0.1:8080", "", nil); err != nil {
		t.Errorf("a good URL: %v", err)
	}
}

// TestProblemError_SaysTheKindOnce: a problem prints its detail and then
// its status and kind, not the status text first ("Not Found: user ...:
// not found"); an answer that is no problem document, or has no detail,
// keeps the status text so the line still says something.
func TestProblemError_SaysTheKindOnce(t *testing.T) {
	for _, c := range []struct {
		pe   client.ProblemError
		want string
	}{
		{client.ProblemError{Status: 404, Kind: "not_found", Title: "Not Found", Detail: `user "nobody": not found`},
			`user "nobody": not found (HTTP 404, not_found)`},
		{client.ProblemError{Status: 409, Kind: "conflict", Title: "Conflict", Detail: "install requests==2.32.3: another package operation is running"},
			"install requests==2.32.3: another package operation is running (HTTP 409, conflict)"},
		{client.ProblemError{Status: 502, Title: "Bad Gateway", Detail: "<html>bad gateway</html>"}, "Bad Gateway: <html>bad gateway</html> (HTTP 502)"},
		{client.ProblemError{Status: 503, Kind: "unavailable"}, "Service Unavailable (HTTP 503, unavailable)"},
	} {
		if got := c.pe.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
