package packages

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
// /sandbox/check): the URL asked (the PEP 503 project
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
func (pm *Manager) CheckIndex(ctx context.Context) IndexCheck {
	r := IndexCheck{IndexURL: pm.opts.IndexURL}
	if pm.opts.IndexURL == "" {
		r.Reason = "python.index_url is empty: offline, packages install from uploaded wheel files only"
		return r
	}
	r.URL = strings.TrimRight(pm.opts.IndexURL, "/") + "/pip/"
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

// PipVersion returns the runtime's `python -I -m pip --version` line (run
// with pip's environment and TMPDIR tmp, bounded by ctx and 15 s), or
// "missing: <why>".
func (pm *Manager) PipVersion(ctx context.Context, tmp string) string {
	pm.mu.RLock()
	python := pm.python
	pm.mu.RUnlock()
	env := pm.pipEnv(tmp)
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
