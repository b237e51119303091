package opcua

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/internal/atomicfile"
)

// Folders of the certificate store under pki_dir (docs/config.md, Data
// directory).
const (
	OwnDir      = "own"
	TrustedDir  = "trusted"
	RejectedDir = "rejected"
)

// Certificate status names of CertInfo.Status.
const (
	CertOwn      = "own"
	CertTrusted  = "trusted"
	CertRejected = "rejected"
)

// ErrCertNotFound is returned by TrustCert and RejectCert when no
// certificate of the store has the thumbprint.
var ErrCertNotFound = errors.New("certificate not found")

// ErrCertUntrusted is wrapped by connection attempts refused because the
// server's certificate is not in pki/trusted, does not chain to a CA there,
// or is outside its validity dates. Tags read Bad_CertificateUntrusted with
// the reason "certificate not trusted".
var ErrCertUntrusted = errors.New("certificate not trusted")

// CertInfo describes one certificate of the store, for `qubiqctl devices
// certs list`. Thumbprint is the SHA-1 of the DER in lower-case hex (the
// OPC UA certificate thumbprint, Part 6 §6.1); File is relative to pki_dir.
type CertInfo struct {
	Thumbprint     string    `json:"thumbprint"`
	Status         string    `json:"status"`
	Subject        string    `json:"subject"`
	Issuer         string    `json:"issuer"`
	ApplicationURI string    `json:"application_uri,omitempty"`
	DNSNames       []string  `json:"dns_names,omitempty"`
	NotBefore      time.Time `json:"not_before"`
	NotAfter       time.Time `json:"not_after"`
	IsCA           bool      `json:"is_ca"`
	File           string    `json:"file"`
}

// Thumbprint returns the OPC UA thumbprint of a DER certificate: SHA-1 of
// the DER, lower-case hex (OPC UA Part 6 §6.1).
func Thumbprint(der []byte) string {
	sum := sha1.Sum(der)
	return hex.EncodeToString(sum[:])
}

// trustSignal wakes drivers waiting on an untrusted server when the store
// changes through TrustCert or RejectCert, so that a certificate moved to
// trusted is used at once, without a restart.
var trustSignal = struct {
	mu sync.Mutex
	ch chan struct{}
}{ch: make(chan struct{})}

func trustChanged() <-chan struct{} {
	trustSignal.mu.Lock()
	defer trustSignal.mu.Unlock()
	return trustSignal.ch
}

func notifyTrust() {
	trustSignal.mu.Lock()
	defer trustSignal.mu.Unlock()
	close(trustSignal.ch)
	trustSignal.ch = make(chan struct{})
}

// storeMu serialises changes of every store of the process (certificate
// generation, trust and reject moves).
var storeMu sync.Mutex

// ListCerts lists the certificates of the store at pkiDir: this client's
// own (own/, including own/<hash>/ for other application URIs), trusted/ and
// rejected/, sorted by status then subject. A file that is not a
// certificate is skipped. A missing folder is empty.
func ListCerts(pkiDir string) ([]CertInfo, error) {
	var out []CertInfo
	for _, st := range []struct{ dir, status string }{{OwnDir, CertOwn}, {TrustedDir, CertTrusted}, {RejectedDir, CertRejected}} {
		certs, err := readCertDir(filepath.Join(pkiDir, st.dir), st.dir == OwnDir)
		if err != nil {
			return nil, fmt.Errorf("list certificates in %s: %w", pkiDir, err)
		}
		for _, c := range certs {
			rel, _ := filepath.Rel(pkiDir, c.path)
			out = append(out, certInfo(c.cert, st.status, rel))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Status != out[j].Status {
			return out[i].Status < out[j].Status
		}
		return out[i].Subject < out[j].Subject
	})
	return out, nil
}

func certInfo(c *x509.Certificate, status, file string) CertInfo {
	ci := CertInfo{
		Thumbprint: Thumbprint(c.Raw),
		Status:     status,
		Subject:    c.Subject.String(),
		Issuer:     c.Issuer.String(),
		DNSNames:   c.DNSNames,
		NotBefore:  c.NotBefore.UTC(),
		NotAfter:   c.NotAfter.UTC(),
		IsCA:       c.IsCA,
		File:       file,
	}
	if len(c.URIs) > 0 {
		ci.ApplicationURI = c.URIs[0].String()
	}
	return ci
}

// TrustCert moves the certificate with the thumbprint (case-insensitive)
// from rejected/ to trusted/ (as <thumbprint>.der), so that drivers accept
// it at their next attempt, which it triggers at once. A certificate
// already trusted is not an error. It returns ErrCertNotFound when neither
// folder holds the thumbprint.
func TrustCert(pkiDir, thumbprint string) error {
	return moveCert(pkiDir, thumbprint, RejectedDir, TrustedDir)
}

// RejectCert moves the certificate with the thumbprint from trusted/ to
// rejected/: drivers refuse the server at their next connection. A
// certificate already rejected is not an error. It returns ErrCertNotFound
// when neither folder holds the thumbprint.
func RejectCert(pkiDir, thumbprint string) error {
	return moveCert(pkiDir, thumbprint, TrustedDir, RejectedDir)
}

func moveCert(pkiDir, thumbprint, from, to string) error {
	storeMu.Lock()
	defer storeMu.Unlock()
	want := strings.ToLower(strings.TrimSpace(thumbprint))
	if want == "" {
		return fmt.Errorf("certificate %q: %w", thumbprint, ErrCertNotFound)
	}
	src, err := readCertDir(filepath.Join(pkiDir, from), false)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", want, err)
	}
	dst, err := readCertDir(filepath.Join(pkiDir, to), false)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", want, err)
	}
	found := false
	for _, c := range dst {
		if Thumbprint(c.cert.Raw) == want {
			found = true
		}
	}
	for _, c := range src {
		if Thumbprint(c.cert.Raw) != want {
			continue
		}
		if !found {
			if err := writeFileAtomic(filepath.Join(pkiDir, to, want+".der"), c.cert.Raw, 0o644); err != nil {
				return fmt.Errorf("certificate %s: %w", want, err)
			}
			found = true
		}
		if err := os.Remove(c.path); err != nil {
			return fmt.Errorf("certificate %s: %w", want, err)
		}
	}
	if !found {
		return fmt.Errorf("certificate %s: %w", want, ErrCertNotFound)
	}
	notifyTrust()
	return nil
}

type certFile struct {
	path string
	cert *x509.Certificate
}

// readCertDir parses every certificate file (DER or PEM, one or more
// certificates) in dir; deep also walks sub-folders except private/.
func readCertDir(dir string, deep bool) ([]certFile, error) {
	var out []certFile
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if de.IsDir() {
			if p != dir && (!deep || de.Name() == "private") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(de.Name(), ".pem") && strings.Contains(de.Name(), "key") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, c := range parseCerts(b) {
			out = append(out, certFile{path: p, cert: c})
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// parseCerts parses DER (one or several concatenated) or PEM certificates;
// it returns nil for anything else.
func parseCerts(b []byte) []*x509.Certificate {
	if bytes.Contains(b, []byte("-----BEGIN")) {
		var out []*x509.Certificate
		for {
			var blk *pem.Block
			blk, b = pem.Decode(b)
			if blk == nil {
				return out
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
				out = append(out, c)
			}
		}
	}
	cs, err := x509.ParseCertificates(b)
	if err != nil {
		return nil
	}
	return cs
}

// splitChain parses the ServerCertificate of an endpoint, which some servers
// (WinCC, node-opcua with a CA-issued certificate) send as leaf ‖
// intermediates in DER (docs/opcua.md, fault C19). The leaf comes first.
func splitChain(der []byte) ([]*x509.Certificate, error) {
	if len(der) == 0 {
		return nil, errors.New("the server sent no certificate")
	}
	cs, err := x509.ParseCertificates(der)
	if err != nil {
		return nil, fmt.Errorf("the server certificate does not parse: %w", err)
	}
	if len(cs) == 0 {
		return nil, errors.New("the server sent no certificate")
	}
	return cs, nil
}

// untrustedError is a refusal of the server's certificate.
type untrustedError struct {
	thumb  string
	detail string
}

// Error names the thumbprint and why the certificate is not trusted.
func (e *untrustedError) Error() string {
	return fmt.Sprintf("%v (thumbprint %s): %s", ErrCertUntrusted, e.thumb, e.detail)
}

// Unwrap returns ErrCertUntrusted.
func (e *untrustedError) Unwrap() error { return ErrCertUntrusted }

// checkServerCert decides trust in the server certificate chain der before
// any secure channel is opened with it (docs/architecture.md, Rules from the field: trust
// before encrypting). The leaf is trusted when it is inside its validity
// dates and either its thumbprint matches a certificate in pki/trusted or
// it chains (through the intermediates the server sent) to a CA certificate
// in pki/trusted. An untrusted leaf — only the leaf — is written to
// pki/rejected/<thumbprint>.der and the error wraps ErrCertUntrusted. It
// returns the leaf.
func checkServerCert(pkiDir string, der []byte, now time.Time) (*x509.Certificate, error) {
	chain, err := splitChain(der)
	if err != nil {
		return nil, err
	}
	leaf := chain[0]
	thumb := Thumbprint(leaf.Raw)
	reject := func(detail string) (*x509.Certificate, error) {
		if err := storeRejected(pkiDir, leaf.Raw, thumb); err != nil {
			return nil, fmt.Errorf("%w; storing it in %s failed: %v", &untrustedError{thumb: thumb, detail: detail}, RejectedDir, err)
		}
		return nil, &untrustedError{thumb: thumb, detail: detail}
	}
	if now.Before(leaf.NotBefore) {
		return reject("not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return reject("expired on " + leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	trusted, err := readCertDir(filepath.Join(pkiDir, TrustedDir), false)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", TrustedDir, err)
	}
	roots := x509.NewCertPool()
	nroots := 0
	for _, t := range trusted {
		if bytes.Equal(t.cert.Raw, leaf.Raw) {
			return leaf, nil
		}
		if t.cert.IsCA {
			roots.AddCert(t.cert)
			nroots++
		}
	}
	if nroots > 0 {
		inter := x509.NewCertPool()
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		_, verr := leaf.Verify(x509.VerifyOptions{
			Roots:         roots,
			Intermediates: inter,
			CurrentTime:   now,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		})
		if verr == nil {
			return leaf, nil
		}
	}
	return reject("not in " + TrustedDir + " and not issued by a CA there; move it from " + RejectedDir + " to " + TrustedDir + " to trust it (qubiqctl devices certs trust)")
}

// trustFingerprint summarises pki/trusted (names, sizes, times): a change
// while the driver waits on an untrusted server makes it retry at once, also
// when an operator moved a file by hand.
func trustFingerprint(pkiDir string) string {
	ents, err := os.ReadDir(filepath.Join(pkiDir, TrustedDir))
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s/%d/%d;", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

func storeRejected(pkiDir string, der []byte, thumb string) error {
	storeMu.Lock()
	defer storeMu.Unlock()
	p := filepath.Join(pkiDir, RejectedDir, thumb+".der")
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	return writeFileAtomic(p, der, 0o644)
}

// writeFileAtomic writes b to p through the project's one atomic write
// (internal/atomicfile), making p's directory first.
func writeFileAtomic(p string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, b, mode)
}

// ownCert is this client's application instance certificate and key.
type ownCert struct {
	der []byte
	key *rsa.PrivateKey
	dir string
}

// loadOwnCert returns the application instance certificate for appURI from
// pki/own, making it at first start (OPC UA Part 6 §6.2.2): RSA 2048,
// SHA-256, self-signed, valid 10 years, with appURI as its SAN URI and the
// host name as SAN DNS name. pki/own holds the certificate of the first
// application URI; another URI gets pki/own/<first 12 hex of SHA-1(URI)>/.
// The key is own/.../key.pem (PKCS#1, mode 0600).
func loadOwnCert(pkiDir, appURI string, now time.Time) (*ownCert, error) {
	storeMu.Lock()
	defer storeMu.Unlock()
	dir := filepath.Join(pkiDir, OwnDir)
	c, err := readOwn(dir)
	if err != nil {
		return nil, err
	}
	if c != nil && certURI(c.der) != appURI {
		sum := sha1.Sum([]byte(appURI))
		dir = filepath.Join(dir, hex.EncodeToString(sum[:])[:12])
		if c, err = readOwn(dir); err != nil {
			return nil, err
		}
	}
	if c != nil {
		return c, nil
	}
	return makeOwn(dir, appURI, now)
}

func certURI(der []byte) string {
	c, err := x509.ParseCertificate(der)
	if err != nil || len(c.URIs) == 0 {
		return ""
	}
	return c.URIs[0].String()
}

func readOwn(dir string) (*ownCert, error) {
	der, err := os.ReadFile(filepath.Join(dir, "cert.der"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("own certificate: %w", err)
	}
	kb, err := os.ReadFile(filepath.Join(dir, "private", "key.pem"))
	if err != nil {
		return nil, fmt.Errorf("own certificate key: %w", err)
	}
	key, err := parseRSAKey(kb)
	if err != nil {
		return nil, fmt.Errorf("own certificate key %s: %w", filepath.Join(dir, "private", "key.pem"), err)
	}
	if _, err := x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("own certificate %s: %w", filepath.Join(dir, "cert.der"), err)
	}
	return &ownCert{der: der, key: key, dir: dir}, nil
}

func makeOwn(dir, appURI string, now time.Time) (*ownCert, error) {
	u, err := url.Parse(appURI)
	if err != nil {
		return nil, fmt.Errorf("application uri %q: %w", appURI, err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("own certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("own certificate: %w", err)
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "QUBIQ Edge", Organization: []string{"QUBIQ"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment |
			x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{u},
	}
	if host != "" {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("own certificate: %w", err)
	}
	kp := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.MkdirAll(filepath.Join(dir, "private"), 0o700); err != nil {
		return nil, fmt.Errorf("own certificate: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "private", "key.pem"), kp, 0o600); err != nil {
		return nil, fmt.Errorf("own certificate key: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "cert.der"), der, 0o644); err != nil {
		return nil, fmt.Errorf("own certificate: %w", err)
	}
	return &ownCert{der: der, key: key, dir: dir}, nil
}

// parseRSAKey parses an RSA private key in PEM or DER, PKCS#1 or PKCS#8.
func parseRSAKey(b []byte) (*rsa.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	if k, err := x509.ParsePKCS1PrivateKey(b); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b)
	if err != nil {
		return nil, errors.New("not an RSA private key (PKCS#1 or PKCS#8, PEM or DER)")
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA private key")
	}
	return rk, nil
}

// parseCertFile reads one certificate (PEM or DER) for X.509 user tokens.
func parseCertFile(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	cs := parseCerts(b)
	if len(cs) == 0 {
		return nil, fmt.Errorf("%s: no certificate", p)
	}
	return cs[0].Raw, nil
}
