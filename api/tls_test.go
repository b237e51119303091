package api

import (
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func tlsNode(t *testing.T, src string) yaml.Node {
	t.Helper()
	var doc struct {
		TLS yaml.Node `yaml:"tls"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.TLS
}

var quiet = slog.New(slog.DiscardHandler)

func TestTLSConfig_OffIsPlainHTTP(t *testing.T) {
	for _, src := range []string{"", "tls: off", "tls: false"} {
		conf, info, err := TLSConfig(tlsNode(t, src), "/etc/qubiq/qubiq.yaml", t.TempDir(), "127.0.0.1:8080", "a1", quiet)
		if conf != nil || info != nil || err != nil {
			t.Errorf("%q: %v %v %v, want nil", src, conf, info, err)
		}
	}
}

func TestTLSConfig_AutoMakesOnceThenReuses(t *testing.T) {
	data := t.TempDir()
	conf, info, err := TLSConfig(tlsNode(t, "tls: auto"), "/etc/qubiq/qubiq.yaml", data, "10.1.2.3:8443", "line1-edge-01", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode != "auto" || !regexp.MustCompile(`^([0-9A-F]{2}:){31}[0-9A-F]{2}$`).MatchString(info.FingerprintSHA256) {
		t.Fatalf("info %+v", info)
	}
	if conf.MinVersion < 0x0303 || len(conf.Certificates) != 1 {
		t.Fatalf("tls config %+v", conf)
	}
	st, err := os.Stat(filepath.Join(data, "tls", TLSKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	raw, err := os.ReadFile(filepath.Join(data, "tls", TLSCertFile))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(raw)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cert.DNSNames, "localhost") || !slices.Contains(cert.DNSNames, "line1-edge-01") {
		t.Errorf("DNS names %v", cert.DNSNames)
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Contains(ips, "127.0.0.1") || !slices.Contains(ips, "10.1.2.3") {
		t.Errorf("IP addresses %v", ips)
	}
	if Fingerprint(cert.Raw) != info.FingerprintSHA256 {
		t.Errorf("fingerprint %s is not the certificate's", info.FingerprintSHA256)
	}
	_, info2, err := TLSConfig(tlsNode(t, "tls: auto"), "/etc/qubiq/qubiq.yaml", data, "10.1.2.3:8443", "line1-edge-01", quiet)
	if err != nil || info2.FingerprintSHA256 != info.FingerprintSHA256 {
		t.Fatalf("second start: %v %+v, want the same certificate", err, info2)
	}
}

func TestTLSConfig_FilesRelativeToConfig(t *testing.T) {
	data := t.TempDir()
	_, auto, err := TLSConfig(tlsNode(t, "tls: auto"), "/x/qubiq.yaml", data, "127.0.0.1:0", "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	for _, f := range []string{TLSCertFile, TLSKeyFile} {
		b, err := os.ReadFile(filepath.Join(data, "tls", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, info, err := TLSConfig(tlsNode(t, "tls: {cert: cert.pem, key: key.pem}"), filepath.Join(cfgDir, "qubiq.yaml"), t.TempDir(), "127.0.0.1:0", "", quiet)
	if err != nil || info.Mode != "files" || info.FingerprintSHA256 != auto.FingerprintSHA256 {
		t.Fatalf("files: %v %+v", err, info)
	}
}

func TestTLSConfig_BadValuesNameTheLine(t *testing.T) {
	for _, src := range []string{"tls: on", "tls: {cert: a.pem}", "tls: [a, b]", "tls: {cert: missing.pem, key: missing.pem}"} {
		_, _, err := TLSConfig(tlsNode(t, src), "/etc/qubiq/qubiq.yaml", t.TempDir(), "127.0.0.1:0", "", quiet)
		if err == nil || !strings.Contains(err.Error(), "/etc/qubiq/qubiq.yaml:1: http.tls") {
			t.Errorf("%q: %v, want an error naming the file, line and key", src, err)
		}
	}
}
