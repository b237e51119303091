package opcua

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uapolicy"
)

// selfSigned makes a self-signed server certificate valid from nb to na.
func selfSigned(t testing.TB, cn string, nb, na time.Time) *x509.Certificate {
	t.Helper()
	k := mustKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: nb, NotAfter: na, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func sha1hex(b []byte) string {
	s := sha1.Sum(b)
	return hex.EncodeToString(s[:])
}

func TestThumbprint_IsSHA1OfDER(t *testing.T) {
	c := selfSigned(t, "s", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if got := Thumbprint(c.Raw); got != sha1hex(c.Raw) || got != hex.EncodeToString(uapolicy.Thumbprint(c.Raw)) {
		t.Errorf("Thumbprint = %s, want the SHA-1 of the DER", got)
	}
}

func TestLoadOwnCert_MadeOnceWithApplicationURI(t *testing.T) {
	pki := t.TempDir()
	now := time.Now()
	own, err := loadOwnCert(pki, "urn:edge:a", now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(own.der)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "urn:edge:a" {
		t.Errorf("SAN URIs %v, want urn:edge:a", c.URIs)
	}
	if own.key.N.BitLen() != 2048 || c.SignatureAlgorithm != x509.SHA256WithRSA {
		t.Errorf("key %d bits, %s; want RSA 2048 with SHA-256", own.key.N.BitLen(), c.SignatureAlgorithm)
	}
	if c.NotAfter.Before(now.AddDate(9, 0, 0)) || c.NotBefore.After(now) {
		t.Errorf("validity %v..%v", c.NotBefore, c.NotAfter)
	}
	fi, err := os.Stat(filepath.Join(pki, OwnDir, "private", "key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi, err)
	}
	again, err := loadOwnCert(pki, "urn:edge:a", now)
	if err != nil || !bytes.Equal(again.der, own.der) {
		t.Errorf("second load made a new certificate (%v)", err)
	}
	other, err := loadOwnCert(pki, "urn:edge:b", now)
	if err != nil {
		t.Fatal(err)
	}
	if certURI(other.der) != "urn:edge:b" || filepath.Dir(other.dir) != filepath.Join(pki, OwnDir) || bytes.Equal(other.der, own.der) {
		t.Errorf("another application URI: %s in %s", certURI(other.der), other.dir)
	}
	if first, _ := loadOwnCert(pki, "urn:edge:a", now); !bytes.Equal(first.der, own.der) {
		t.Error("the first certificate changed")
	}
}

func TestCheckServerCert_ThumbprintTrust(t *testing.T) {
	pki := t.TempDir()
	now := time.Now()
	srv := selfSigned(t, "server", now.Add(-time.Hour), now.Add(time.Hour))
	thumb := Thumbprint(srv.Raw)
	_, err := checkServerCert(pki, srv.Raw, now)
	if !errors.Is(err, ErrCertUntrusted) || !strings.Contains(err.Error(), thumb) {
		t.Fatalf("unknown certificate: %v, want ErrCertUntrusted naming %s", err, thumb)
	}
	got, err := os.ReadFile(filepath.Join(pki, RejectedDir, thumb+".der"))
	if err != nil || !bytes.Equal(got, srv.Raw) {
		t.Fatalf("rejected/%s.der: %v", thumb, err)
	}
	if err := TrustCert(pki, thumb); err != nil {
		t.Fatal(err)
	}
	if leaf, err := checkServerCert(pki, srv.Raw, now); err != nil || !bytes.Equal(leaf.Raw, srv.Raw) {
		t.Errorf("trusted certificate: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pki, RejectedDir, thumb+".der")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the certificate is still in rejected/: %v", err)
	}
	// A server that swaps its certificate is refused until trusted again.
	swapped := selfSigned(t, "server", now.Add(-time.Hour), now.Add(time.Hour))
	if _, err := checkServerCert(pki, swapped.Raw, now); !errors.Is(err, ErrCertUntrusted) {
		t.Errorf("swapped certificate: %v, want ErrCertUntrusted", err)
	}
}

func TestCheckServerCert_ValidityDates(t *testing.T) {
	pki := t.TempDir()
	now := time.Now()
	for _, tc := range []struct {
		name   string
		nb, na time.Time
		want   string
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-24 * time.Hour), "expired"},
		{"not yet valid", now.Add(24 * time.Hour), now.Add(48 * time.Hour), "not valid before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := selfSigned(t, tc.name, tc.nb, tc.na)
			// Even a trusted thumbprint is refused outside its dates.
			if err := os.MkdirAll(filepath.Join(pki, TrustedDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pki, TrustedDir, tc.name+".der"), c.Raw, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := checkServerCert(pki, c.Raw, now)
			if !errors.Is(err, ErrCertUntrusted) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkServerCert = %v, want ErrCertUntrusted %q", err, tc.want)
			}
		})
	}
}

// C19: a chain leaf ‖ intermediate is split; only the leaf is stored when
// refused; with the root CA trusted, the chain is accepted through the
// intermediate the server sent.
func TestCheckServerCert_C19Chain(t *testing.T) {
	pki := t.TempDir()
	leaf, root, chainFile, _ := chainCerts(t, t.TempDir())
	pemChain, _ := os.ReadFile(chainFile)
	var der []byte
	var inter []byte
	for i := 0; ; i++ {
		var blk *pem.Block
		blk, pemChain = pem.Decode(pemChain)
		if blk == nil {
			break
		}
		der = append(der, blk.Bytes...)
		if i == 1 {
			inter = blk.Bytes
		}
	}
	if _, err := x509.ParseCertificate(der); err == nil || !strings.Contains(err.Error(), "trailing data") {
		t.Fatalf("the single-certificate parser gopcua v0.8.0 uses accepts the chain (%v): the case does not hold", err)
	}
	_, err := checkServerCert(pki, der, time.Now())
	if !errors.Is(err, ErrCertUntrusted) || !strings.Contains(err.Error(), Thumbprint(leaf.Raw)) {
		t.Fatalf("untrusted chain: %v, want ErrCertUntrusted with the leaf thumbprint", err)
	}
	ents, _ := os.ReadDir(filepath.Join(pki, RejectedDir))
	if len(ents) != 1 {
		t.Fatalf("rejected/ holds %d files, want 1", len(ents))
	}
	if got, _ := os.ReadFile(filepath.Join(pki, RejectedDir, ents[0].Name())); !bytes.Equal(got, leaf.Raw) {
		t.Error("rejected/ holds more than the leaf")
	}
	_ = os.MkdirAll(filepath.Join(pki, TrustedDir), 0o755)
	if err := os.WriteFile(filepath.Join(pki, TrustedDir, "root.der"), root.Raw, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := checkServerCert(pki, der, time.Now())
	if err != nil || !bytes.Equal(got.Raw, leaf.Raw) {
		t.Fatalf("chain to a trusted root: %v", err)
	}
	// Without the intermediate, the leaf does not chain to the root.
	if _, err := checkServerCert(pki, leaf.Raw, time.Now()); !errors.Is(err, ErrCertUntrusted) {
		t.Errorf("leaf without its intermediate: %v, want ErrCertUntrusted", err)
	}
	// The intermediate trusted as a CA is enough too.
	pki2 := t.TempDir()
	_ = os.MkdirAll(filepath.Join(pki2, TrustedDir), 0o755)
	_ = os.WriteFile(filepath.Join(pki2, TrustedDir, "inter.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: inter}), 0o644)
	if _, err := checkServerCert(pki2, leaf.Raw, time.Now()); err != nil {
		t.Errorf("leaf issued by a trusted intermediate (PEM): %v", err)
	}
}

// C19: the thumbprint gopcua sends in the handshake is the SHA-1 of the
// leaf DER only.
func TestLeafEndpoint_C19ThumbprintOfLeaf(t *testing.T) {
	leaf, _, chainFile, _ := chainCerts(t, t.TempDir())
	b, _ := os.ReadFile(chainFile)
	var chain []byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		chain = append(chain, blk.Bytes...)
	}
	ep := &ua.EndpointDescription{ServerCertificate: chain, SecurityPolicyURI: ua.SecurityPolicyURIBasic256Sha256}
	got := leafEndpoint(ep, leaf)
	if !bytes.Equal(got.ServerCertificate, leaf.Raw) {
		t.Error("the endpoint handed to gopcua holds more than the leaf")
	}
	if hex.EncodeToString(uapolicy.Thumbprint(got.ServerCertificate)) != sha1hex(leaf.Raw) {
		t.Error("the handshake thumbprint is not the SHA-1 of the leaf")
	}
	if !bytes.Equal(ep.ServerCertificate, chain) {
		t.Error("leafEndpoint changed the original endpoint")
	}
}

func TestTrustCert_RejectCert_ListCerts(t *testing.T) {
	pki := t.TempDir()
	now := time.Now()
	if _, err := loadOwnCert(pki, "urn:edge:a", now); err != nil {
		t.Fatal(err)
	}
	a := selfSigned(t, "A", now.Add(-time.Hour), now.Add(time.Hour))
	b := selfSigned(t, "B", now.Add(-time.Hour), now.Add(time.Hour))
	_, _ = checkServerCert(pki, a.Raw, now)
	_, _ = checkServerCert(pki, b.Raw, now)
	ta, tb := Thumbprint(a.Raw), Thumbprint(b.Raw)

	changed := trustChanged()
	if err := TrustCert(pki, strings.ToUpper(ta)); err != nil {
		t.Fatalf("TrustCert: %v", err)
	}
	select {
	case <-changed:
	default:
		t.Error("TrustCert did not wake waiting drivers")
	}
	if err := TrustCert(pki, ta); err != nil {
		t.Errorf("TrustCert of a trusted certificate: %v, want nil", err)
	}
	if err := RejectCert(pki, tb); err != nil {
		t.Errorf("RejectCert of a rejected certificate: %v, want nil", err)
	}
	if err := TrustCert(pki, "00"); !errors.Is(err, ErrCertNotFound) {
		t.Errorf("TrustCert(unknown) = %v, want ErrCertNotFound", err)
	}
	if err := RejectCert(pki, ""); !errors.Is(err, ErrCertNotFound) {
		t.Errorf("RejectCert(\"\") = %v, want ErrCertNotFound", err)
	}
	certs, err := ListCerts(pki)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, c := range certs {
		status[c.Thumbprint] = c.Status
		if c.Thumbprint == ta && (c.Subject != "CN=A" || c.File != filepath.Join(TrustedDir, ta+".der")) {
			t.Errorf("CertInfo of A: %+v", c)
		}
		if c.Status == CertOwn && c.ApplicationURI != "urn:edge:a" {
			t.Errorf("own certificate %+v: want its application URI", c)
		}
	}
	if status[ta] != CertTrusted || status[tb] != CertRejected || len(certs) != 3 {
		t.Errorf("ListCerts statuses %v (%d certificates), want A trusted, B rejected and the own one", status, len(certs))
	}
	if err := RejectCert(pki, ta); err != nil {
		t.Fatal(err)
	}
	if _, err := checkServerCert(pki, a.Raw, now); !errors.Is(err, ErrCertUntrusted) {
		t.Errorf("after RejectCert the server is still trusted: %v", err)
	}
	if list, _ := ListCerts(t.TempDir()); len(list) != 0 {
		t.Errorf("ListCerts of an empty store: %v", list)
	}
}
