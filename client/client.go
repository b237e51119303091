// Package client is the Go client of the QUBIQ Edge REST API (the routes
// are listed in docs/security.md, "What each route needs"), used by
// qubiqctl and by tests. Every method maps to one route,
// sends and returns the wire structs of api/apitypes, and reports an error
// answer as a *ProblemError.
//
// It imports the standard library, api/apitypes and value only
// (deps_test.go), so the CLI never links daemon code.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
)

// DefaultTimeout is the whole-request timeout of the http.Client New makes
// when given none.
const DefaultTimeout = 30 * time.Second

// maxResponse caps how much of an answer is read (64 MiB).
const maxResponse = 64 << 20

// Client calls one daemon. It is safe for concurrent use.
type Client struct {
	base   string // scheme://host[:port][/prefix], no trailing slash
	apiKey string
	hc     *http.Client
}

// New returns a client for the daemon at baseURL (http or https, as in
// --url / QUBIQ_URL, e.g. "http://127.0.0.1:8080") that sends apiKey as its
// Bearer credential (none when empty). hc nil means an http.Client with
// DefaultTimeout. The error names a baseURL that is not an http(s) URL.
func New(baseURL, apiKey string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && !strings.Contains(baseURL, "://")) {
		// "127.0.0.1:8080", "localhost:8080": a host and port without the
		// scheme.
		if h, perr := url.Parse("http://" + baseURL); perr == nil && h.Host != "" && h.Port() != "" {
			return nil, fmt.Errorf("daemon URL %q has no scheme: did you mean http://%s (or https:// with TLS)?", baseURL, baseURL)
		}
		if err != nil {
			return nil, fmt.Errorf("daemon URL %q: %w", baseURL, err)
		}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("daemon URL %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("daemon URL %q: must not have a query or fragment", baseURL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), apiKey: apiKey, hc: hc}, nil
}

// ProblemError is an error answer of the API (application/problem+json,
// RFC 9457): Status is the HTTP status, Kind the machine
// reason ("permission_denied", "timeout", "busy", ...), Detail the human
// explanation (it names the missing scope, the bad field, ...). An error
// answer that is not a problem document (a proxy's page) becomes a
// ProblemError with Kind "" and the start of the body as Detail.
type ProblemError struct {
	Status int
	Kind   string
	Title  string
	Detail string
	Type   string
	// RetryAfter is the Retry-After header (seconds), when the daemon sent
	// one (busy, unavailable).
	RetryAfter string
}

// Error returns "Detail (HTTP Status, Kind)": the daemon's detail names
// the subject and what is wrong, the status and kind say which kind of
// fault it is, once (not "Not Found: ...: not found"). An answer without
// a kind (not a problem document: a proxy's page) or without a detail
// starts with the status text: "Bad Gateway: <body> (HTTP 502)".
func (e *ProblemError) Error() string {
	s := e.Detail
	if e.Kind == "" || s == "" {
		s = e.Title
		if s == "" {
			s = http.StatusText(e.Status)
		}
		if e.Detail != "" {
			s += ": " + e.Detail
		}
	}
	s += fmt.Sprintf(" (HTTP %d", e.Status)
	if e.Kind != "" {
		s += ", " + e.Kind
	}
	return s + ")"
}

// path builds "/api/v1/" + the escaped segments.
func path(segs ...string) string {
	var b strings.Builder
	b.WriteString("/api/v1")
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// do sends one request with in as its JSON body (none when nil) and decodes
// a 2xx answer into out (ignored when nil). A status listed in also is
// decoded into out as well (GET /health answers 503 with its body).
func (c *Client) do(ctx context.Context, method, p string, in, out any, also ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, p, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, p, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err // a *url.Error: it names the method, the URL and the cause
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, p, err)
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	for _, s := range also {
		ok = ok || (resp.StatusCode == s && isJSON(resp.Header.Get("Content-Type"), "application/json"))
	}
	if !ok {
		return problem(resp, rb)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, p, err)
	}
	return nil
}

func isJSON(ct, want string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == want
}

// problem builds the *ProblemError of an error answer.
func problem(resp *http.Response, body []byte) error {
	pe := &ProblemError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode),
		RetryAfter: resp.Header.Get("Retry-After")}
	var p apitypes.Problem
	ct := resp.Header.Get("Content-Type")
	if (isJSON(ct, apitypes.ProblemContentType) || isJSON(ct, "application/json")) && json.Unmarshal(body, &p) == nil && p.Status != 0 {
		pe.Kind, pe.Detail, pe.Type = p.Kind, p.Detail, p.Type
		if p.Title != "" {
			pe.Title = p.Title
		}
		return pe
	}
	d := strings.TrimSpace(string(body))
	if len(d) > 200 {
		d = d[:200] + "..."
	}
	pe.Detail = d
	return pe
}

// IsKind reports whether err is a *ProblemError of kind.
func IsKind(err error, kind string) bool {
	var pe *ProblemError
	return errors.As(err, &pe) && pe.Kind == kind
}

// Health calls GET /api/v1/health (no credentials needed). A "failed"
// daemon answers 503 with the same body, which Health returns without error.
func (c *Client) Health(ctx context.Context) (apitypes.Health, error) {
	var h apitypes.Health
	err := c.do(ctx, http.MethodGet, path("health"), nil, &h, http.StatusServiceUnavailable)
	return h, err
}

// ListTags calls GET /api/v1/tags (tag:read).
func (c *Client) ListTags(ctx context.Context) ([]apitypes.TagInfo, error) {
	var out []apitypes.TagInfo
	err := c.do(ctx, http.MethodGet, path("tags"), nil, &out)
	return out, err
}

// ReadTags calls POST /api/v1/tags/read (tag:read): one TagValue per path,
// in order, integers exact (int64 or uint64).
func (c *Client) ReadTags(ctx context.Context, paths ...string) ([]apitypes.TagValue, error) {
	var out []apitypes.TagValue
	err := c.do(ctx, http.MethodPost, path("tags", "read"), apitypes.ReadRequest{Paths: nonNil(paths)}, &out)
	return out, err
}

// WriteTags calls POST /api/v1/tags/write (tag:write and each tag's write
// level): one WriteResult per write, Status "Good" when written. A refused
// batch (nothing written) is a *ProblemError with Status 503.
func (c *Client) WriteTags(ctx context.Context, writes []apitypes.TagWrite) ([]apitypes.WriteResult, error) {
	var out []apitypes.WriteResult
	err := c.do(ctx, http.MethodPost, path("tags", "write"), apitypes.WriteRequest{Writes: nonNil(writes)}, &out)
	return out, err
}

// SaveScript calls PUT /api/v1/scripts/{module} (designer).
func (c *Client) SaveScript(ctx context.Context, module, code string) (apitypes.ScriptSaved, error) {
	var out apitypes.ScriptSaved
	err := c.do(ctx, http.MethodPut, path("scripts", module), apitypes.ScriptSaveRequest{Code: code}, &out)
	return out, err
}

// RunScript calls POST /api/v1/scripts/{module}/{entry}/run
// (script:execute) with args as the JSON "args" (null when empty). A run
// that did not return is a *ProblemError whose Kind says why ("timeout",
// "script_error", "busy", ...). The http.Client's timeout must exceed the
// entry's.
func (c *Client) RunScript(ctx context.Context, module, entry string, args json.RawMessage) (apitypes.ScriptRun, error) {
	var out apitypes.ScriptRun
	err := c.do(ctx, http.MethodPost, path("scripts", module, entry, "run"), apitypes.ScriptRunRequest{Args: args}, &out)
	return out, err
}

// LintScript calls POST /api/v1/scripts/lint (designer).
func (c *Client) LintScript(ctx context.Context, code string) (apitypes.LintResult, error) {
	var out apitypes.LintResult
	err := c.do(ctx, http.MethodPost, path("scripts", "lint"), apitypes.LintRequest{Code: code}, &out)
	return out, err
}

// ListScripts calls GET /api/v1/scripts (designer).
func (c *Client) ListScripts(ctx context.Context) ([]apitypes.ScriptInfo, error) {
	var out []apitypes.ScriptInfo
	err := c.do(ctx, http.MethodGet, path("scripts"), nil, &out)
	return out, err
}

// CreateAPIKey calls POST /api/v1/apikeys (users_admin). The token in the
// answer is shown this once.
func (c *Client) CreateAPIKey(ctx context.Context, req apitypes.APIKeyRequest) (apitypes.APIKeyCreated, error) {
	var out apitypes.APIKeyCreated
	req.Scopes = nonNil(req.Scopes)
	err := c.do(ctx, http.MethodPost, path("apikeys"), req, &out)
	return out, err
}

// ListAPIKeys calls GET /api/v1/apikeys (users_admin).
func (c *Client) ListAPIKeys(ctx context.Context) ([]apitypes.APIKeyInfo, error) {
	var out []apitypes.APIKeyInfo
	err := c.do(ctx, http.MethodGet, path("apikeys"), nil, &out)
	return out, err
}

// RevokeAPIKey calls DELETE /api/v1/apikeys/{id} (users_admin): what
// happened (Done.Already for a key revoked before; a daemon that answers
// 204 leaves Done zero). An unknown id is a *ProblemError with Status 404.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) (apitypes.Done, error) {
	var out apitypes.Done
	err := c.do(ctx, http.MethodDelete, path("apikeys", id), nil, &out)
	return out, err
}

// ListDevices calls GET /api/v1/devices (tag:read).
func (c *Client) ListDevices(ctx context.Context) ([]apitypes.DeviceInfo, error) {
	var out []apitypes.DeviceInfo
	err := c.do(ctx, http.MethodGet, path("devices"), nil, &out)
	return out, err
}

// AuditRecords calls GET /api/v1/audit: the records after sequence number
// after, oldest first, at most limit (users_admin); a non-empty result
// keeps only the records with that result ("ok", "script_error",
// "refused", ...).
func (c *Client) AuditRecords(ctx context.Context, after uint64, limit int, result string) ([]apitypes.AuditRecord, error) {
	var out []apitypes.AuditRecord
	q := fmt.Sprintf("%s?after=%d&limit=%d", path("audit"), after, limit)
	if result != "" {
		q += "&result=" + url.QueryEscape(result)
	}
	err := c.do(ctx, http.MethodGet, q, nil, &out)
	return out, err
}

// DevicePlan calls GET /api/v1/devices/{name}/plan: the requests one scan of
// the device sends, per scan class.
func (c *Client) DevicePlan(ctx context.Context, name string) ([]apitypes.PlannedRequest, error) {
	var out []apitypes.PlannedRequest
	err := c.do(ctx, http.MethodGet, path("devices", name, "plan"), nil, &out)
	return out, err
}

// Provision calls POST /api/v1/provision (the bootstrap token): it sets the
// first admin password and revokes the bootstrap token.
func (c *Client) Provision(ctx context.Context, password string) error {
	return c.do(ctx, http.MethodPost, path("provision"), apitypes.ProvisionRequest{Password: password}, nil)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
