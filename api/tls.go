package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
)

// The listener's TLS is the API's own part of the daemon config: it parses
// and makes it here.

// TLSCertFile and TLSKeyFile are the names of the self-signed certificate
// and key in <data_dir>/tls (README: where the data lives).
const (
	TLSCertFile = "cert.pem"
	TLSKeyFile  = "key.pem"
)

// TLSConfig reads the listener's section of the daemon config, http.tls
// (README: configuration): "off" (or absent)
// gives nil; "auto" loads <dataDir>/tls/cert.pem and key.pem, making a
// self-signed ECDSA P-256 certificate there on first start (names:
// localhost, the host name, the appliance id; addresses: loopback and the
// listen address); {cert: FILE, key: FILE} loads those files, relative to
// the config file's directory. The certificate's SHA-256 fingerprint is
// logged and returned for health.
func TLSConfig(n yaml.Node, configFile, dataDir, listen, applianceID string, log *slog.Logger) (*tls.Config, *apitypes.TLSInfo, error) {
	var cert tls.Certificate
	mode := ""
	switch {
	case n.Kind == 0 || (n.Kind == yaml.ScalarNode && (n.Value == "off" || n.Value == "false" || n.Value == "")):
		return nil, nil, nil
	case n.Kind == yaml.ScalarNode && n.Value == "auto":
		mode = "auto"
		var err error
		if cert, err = autoCert(filepath.Join(dataDir, "tls"), listen, applianceID, log); err != nil {
			return nil, nil, err
		}
	case n.Kind == yaml.MappingNode:
		mode = "files"
		var files struct {
			Cert string `yaml:"cert"`
			Key  string `yaml:"key"`
		}
		if err := n.Decode(&files); err != nil || files.Cert == "" || files.Key == "" || len(n.Content) != 4 {
			return nil, nil, fmt.Errorf("%s:%d: http.tls: want off, auto or {cert: FILE, key: FILE}", configFile, n.Line)
		}
		dir := filepath.Dir(configFile)
		abs := func(p string) string {
			if filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(dir, p)
		}
		var err error
		if cert, err = tls.LoadX509KeyPair(abs(files.Cert), abs(files.Key)); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: http.tls: %w", configFile, n.Line, err)
		}
	default:
		return nil, nil, fmt.Errorf("%s:%d: http.tls %q: want off, auto or {cert: FILE, key: FILE}", configFile, n.Line, n.Value)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("http.tls: certificate: %w", err)
	}
	info := &apitypes.TLSInfo{Mode: mode, FingerprintSHA256: Fingerprint(leaf.Raw), NotAfter: leaf.NotAfter.UTC()}
	log.Info("https on", slog.String("mode", mode), slog.String("fingerprint_sha256", info.FingerprintSHA256),
		slog.Time("not_after", info.NotAfter))
	if time.Until(leaf.NotAfter) < 30*24*time.Hour {
		log.Warn("TLS certificate expires soon", slog.Time("not_after", leaf.NotAfter))
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, info, nil
}

// Fingerprint is the SHA-256 of der as colon-separated upper-case hex
// pairs (as browsers show it).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

var dnsName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// autoCert loads the certificate in dir, or makes a self-signed one there.
func autoCert(dir, listen, applianceID string, log *slog.Logger) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, TLSCertFile), filepath.Join(dir, TLSKeyFile)
	if _, err := os.Stat(certPath); err == nil {
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return cert, fmt.Errorf("http.tls auto: %w", err)
		}
		return cert, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: serial: %w", err)
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && dnsName.MatchString(h) {
		names = append(names, h)
	}
	if dnsName.MatchString(applianceID) && !slices.Contains(names, applianceID) {
		names = append(names, applianceID)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
			ips = append(ips, ip)
		}
	}
	now := time.Now()
	cn := "QUBIQ Edge"
	if applianceID != "" {
		cn += " " + applianceID
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"QUBIQ Edge (self-signed)"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), DNSNames: names, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: key: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: %w", err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, fmt.Errorf("http.tls auto: %w", err)
	}
	log.Warn("first start with http.tls auto: self-signed certificate made; compare its fingerprint when a browser or qubiqctl asks",
		slog.String("file", certPath), slog.String("fingerprint_sha256", Fingerprint(der)))
	return tls.LoadX509KeyPair(certPath, keyPath)
}
