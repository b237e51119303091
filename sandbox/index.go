package sandbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// IndexCheckTimeout bounds GET /sandbox/check: connect, TLS and the
// answer together.
const IndexCheckTimeout = 4 * time.Second

// IndexCheck is whether pip can reach python.index_url (GET
// /sandbox/check; SANDBOX.md §4.3): the URL asked (the PEP 503 project
// page of pip itself, <index_url>/pip/), whether the index answered like
// one (2xx), the HTTP status, how long it took in milliseconds, and why
// not when it did not ("python.index_url is empty: offline", "connection
// refused", "no answer within 4s", "DNS", "TLS", "HTTP 404: the index URL
// is probably wrong", "HTTP 401: credentials required").
type IndexCheck struct {
	IndexURL   string  `json:"index_url"`
	URL        string  `json:"url,omitempty"`
	Reachable  bool    `json:"reachable"`
	Status     int     `json:"status,omitempty"`
	DurationMs float64 `json:"duration_ms"`
	Reason     string  `json:"reason,omitempty"`
}

// CheckIndex asks the configured index for its page of pip, as pip would
// (no proxy, the system's CA certificates, PEP 691 content negotiation),
// within IndexCheckTimeout.
func (p *Pool) CheckIndex(ctx context.Context) IndexCheck {
	r := IndexCheck{IndexURL: p.cfg.IndexURL}
	if p.cfg.IndexURL == "" {
		r.Reason = "python.index_url is empty: offline, packages install from uploaded wheel files only"
		return r
	}
	r.URL = strings.TrimRight(p.cfg.IndexURL, "/") + "/pip/"
	cctx, cancel := context.WithTimeout(ctx, IndexCheckTimeout)
	defer cancel()
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: IndexCheckTimeout}).DialContext,
		TLSHandshakeTimeout:   IndexCheckTimeout,
		ResponseHeaderTimeout: IndexCheckTimeout,
		DisableKeepAlives:     true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: IndexCheckTimeout}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, r.URL, nil)
	if err != nil {
		r.Reason = "python.index_url: " + err.Error()
		return r
	}
	req.Header.Set("Accept", "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1")
	req.Header.Set("User-Agent", "qubiqd index check")
	start := time.Now()
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 256<<10))
		resp.Body.Close()
	}
	r.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	if resp != nil {
		r.Status = resp.StatusCode
	}
	switch {
	case err != nil && resp == nil:
		r.Reason = indexErrText(err, r.URL)
	case err != nil:
		r.Reason = fmt.Sprintf("HTTP %d, then the answer broke off: %s", resp.StatusCode, indexErrText(err, r.URL))
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		r.Reachable = true
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		r.Reason = fmt.Sprintf("HTTP %d: the index wants credentials", resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound:
		r.Reason = "HTTP 404: the host answers but the index URL is probably wrong (it should end in /simple, without /pip)"
	default:
		r.Reason = fmt.Sprintf("HTTP %d from the index", resp.StatusCode)
	}
	return r
}

// indexErrText names why a request to the index failed.
func indexErrText(err error, u string) string {
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		uaErr   x509.UnknownAuthorityError
		hostErr x509.HostnameError
		recErr  tls.RecordHeaderError
		ne      net.Error
	)
	host := u
	if pu, perr := url.Parse(u); perr == nil {
		host = pu.Host
	}
	switch {
	case errors.As(err, &dnsErr):
		return "DNS lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens at " + host
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to " + host
	case errors.As(err, &certErr), errors.As(err, &uaErr), errors.As(err, &hostErr):
		return "TLS: the index's certificate is not trusted: " + err.Error()
	case errors.As(err, &recErr):
		return "TLS: the server at " + host + " does not speak TLS"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer from %s within %v", host, IndexCheckTimeout)
	}
	return err.Error()
}

// Settings is GET /sandbox/config: how the sandbox is configured and what
// is in force. Python is the runtime's state (as in Health), PythonPath
// the configured interpreter, Pip pip's version line or why there is none;
// the limits and timeouts as configured (0: unset); Hardening as
// configured (auto|on|off) and its state (Health); the package index
// (empty: offline) and the packages directory; Allowed the built-in import
// allow-list, Installed the installed packages' import names; the linter
// and where it was found.
type Settings struct {
	Python             HealthPython    `json:"python"`
	PythonPath         string          `json:"python_path"`
	Pip                string          `json:"pip"`
	Mode               string          `json:"mode"`
	Replicas           int             `json:"replicas"`
	Queue              int             `json:"queue"`
	GatewayTimeoutMs   [3]int64        `json:"gateway_timeout_ms"` // default, min, max
	NodeTimeoutMs      int64           `json:"node_timeout_ms"`
	MemoryMax          int64           `json:"memory_max"`
	PidsMax            int             `json:"pids_max"`
	CPUMax             float64         `json:"cpu_max"`
	RecycleAfterRuns   int             `json:"recycle_after_runs"`
	RecycleAboveMemory int64           `json:"recycle_above_memory"`
	HardeningConfig    Hardening       `json:"hardening_config"`
	Hardening          HealthHardening `json:"hardening"`
	IndexURL           string          `json:"index_url"`
	PackagesDir        string          `json:"packages_dir"`
	Allowed            []string        `json:"allowed"`
	Installed          []string        `json:"installed"`
	Linter             string          `json:"linter"`
	LinterPath         string          `json:"linter_path,omitempty"`
}

// Settings returns the sandbox's settings; it asks the runtime for pip's
// version (bounded by ctx and a few seconds).
func (p *Pool) Settings(ctx context.Context) Settings {
	h := p.Health()
	p.mu.RLock()
	s := Settings{
		Python: h.Python, PythonPath: p.cfg.PythonPath, Mode: h.Mode, Replicas: p.cfg.Replicas, Queue: p.cfg.Queue,
		GatewayTimeoutMs: [3]int64{p.cfg.GatewayTimeout.Default.Milliseconds(), p.cfg.GatewayTimeout.Min.Milliseconds(),
			p.cfg.GatewayTimeout.Max.Milliseconds()},
		NodeTimeoutMs: p.cfg.NodeTimeout.Milliseconds(), MemoryMax: p.cfg.MemoryMax, PidsMax: p.cfg.PidsMax,
		CPUMax: p.cfg.CPUMax, RecycleAfterRuns: p.cfg.RecycleAfterRuns, RecycleAboveMemory: p.cfg.RecycleAboveMemory,
		HardeningConfig: p.cfg.Hardening, Hardening: h.Hardening, IndexURL: p.cfg.IndexURL, PackagesDir: p.packages,
		Allowed: append([]string{}, p.allowed...), Installed: append([]string{}, p.installed...),
		Linter: h.Linter, LinterPath: p.ruff,
	}
	python := p.python
	p.mu.RUnlock()
	s.Pip = pipVersion(ctx, python, p.pipEnv(p.homeDir))
	return s
}

// MarshalJSON encodes h with the keys of python.hardening
// ({"no_new_privs","netns","landlock"}, each auto, on or off).
func (h Hardening) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"no_new_privs":%q,"netns":%q,"landlock":%q}`,
		hardenMode(h.NoNewPrivs), hardenMode(h.NetNS), hardenMode(h.Landlock))), nil
}

// pipVersion returns `python -I -m pip --version`, or "missing: <why>".
func pipVersion(ctx context.Context, python string, env []string) string {
	if python == "" {
		return "missing: no Python runtime"
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, python, "-I", "-m", "pip", "--version")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "missing: " + lastLine(out.String())
	}
	return strings.TrimSpace(out.String())
}
