package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// httpClient is the client of every request: the CLI's timeout, and with
// --tls-fingerprint a TLS check that pins the daemon's certificate by its
// SHA-256 fingerprint instead of a CA (a self-signed certificate made by
// http.tls: auto; docs/config.md, "http").
func (c *cli) httpClient() *http.Client {
	hc := &http.Client{Timeout: c.g.timeout}
	if c.g.tlsPin == "" {
		return hc
	}
	want := normalizePin(c.g.tlsPin)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{
		// The chain is not checked against a CA; VerifyConnection checks
		// the leaf's fingerprint instead, on every connection.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the daemon presented no certificate")
			}
			if got := fingerprint(cs.PeerCertificates[0].Raw); normalizePin(got) != want {
				return fmt.Errorf("the daemon's certificate has SHA-256 fingerprint %s, not the pinned %s", got, c.g.tlsPin)
			}
			return nil
		},
	}
	hc.Transport = tr
	return hc
}

// fingerprint is the SHA-256 of der as colon-separated upper-case hex
// pairs, as qubiqd logs it and GET /health reports it.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// normalizePin accepts a fingerprint with or without colons, any case.
func normalizePin(s string) string {
	return strings.ToUpper(strings.NewReplacer(":", "", " ", "").Replace(strings.TrimSpace(s)))
}

// tlsHint explains an untrusted certificate: its fingerprint, and how to
// trust it. It prints nothing for other errors.
func tlsHint(w io.Writer, err error) {
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) || ua.Cert == nil {
		return
	}
	fmt.Fprintf(w, "qubiqctl: the daemon's certificate is not signed by a trusted CA; its SHA-256 fingerprint is %s.\n"+
		"qubiqctl: if it is qubiqd's self-signed certificate (http.tls: auto), compare it with the daemon's log, then pass --tls-fingerprint %s\n",
		fingerprint(ua.Cert.Raw), fingerprint(ua.Cert.Raw))
}
