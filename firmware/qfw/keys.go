package qfw

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// DefaultTrustedKeys is the trusted-keys file on an appliance.
const DefaultTrustedKeys = "/etc/qubiq/trusted-firmware-keys"

// privateKeyTag starts a private key file, so that one is never mistaken
// for a trusted-keys file (or shipped as one).
const privateKeyTag = "qubiq-firmware-private-key"

var keyNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// SigningKey is a release manager's ed25519 key with its name (the name the
// signature carries and the trusted-keys file lists).
type SigningKey struct {
	Name string
	Key  ed25519.PrivateKey
}

// Public returns the trusted-keys line of the key: "NAME BASE64\n".
func (k *SigningKey) Public() []byte {
	return fmt.Appendf(nil, "%s %s\n", k.Name, base64.StdEncoding.EncodeToString(k.Key.Public().(ed25519.PublicKey)))
}

// Keygen makes a new signing key named name (letters, digits, ".", "_",
// "-"; at most 64): it returns the private key file's content (keep it
// off the appliance and out of the repository, mode 0600) and the line to
// append to /etc/qubiq/trusted-firmware-keys on appliances that should
// accept bundles it signs. rnd nil is crypto/rand. This is `qubiqctl
// firmware keygen NAME`.
func Keygen(name string, rnd io.Reader) (private, trustedLine []byte, err error) {
	if !keyNameRE.MatchString(name) {
		return nil, nil, fmt.Errorf("firmware: key name %q: use letters, digits, '.', '_' and '-' (at most 64)", name)
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	_, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return nil, nil, fmt.Errorf("firmware: keygen: %w", err)
	}
	k := &SigningKey{Name: name, Key: priv}
	private = fmt.Appendf(nil, "# QUBIQ firmware signing key %q. Secret: never on an appliance, never in a repository.\n%s %s %s\n",
		name, privateKeyTag, name, base64.StdEncoding.EncodeToString(priv.Seed()))
	return private, k.Public(), nil
}

// ParseSigningKey reads a private key file written by Keygen.
func ParseSigningKey(b []byte) (*SigningKey, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != privateKeyTag {
			return nil, fmt.Errorf("firmware: signing key line %d: want %q NAME BASE64-SEED", n, privateKeyTag)
		}
		seed, err := base64.StdEncoding.DecodeString(f[2])
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("firmware: signing key %q: the seed is not %d bytes of base64", f[1], ed25519.SeedSize)
		}
		if !keyNameRE.MatchString(f[1]) {
			return nil, fmt.Errorf("firmware: signing key name %q is not valid", f[1])
		}
		return &SigningKey{Name: f[1], Key: ed25519.NewKeyFromSeed(seed)}, nil
	}
	return nil, errors.New("firmware: no signing key in the file")
}

// LoadSigningKey reads a private key file; one readable by other users is
// refused.
func LoadSigningKey(path string) (*SigningKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("firmware: signing key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("firmware: signing key %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("firmware: signing key: %w", err)
	}
	k, err := ParseSigningKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return k, nil
}

// TrustedKeys are the public keys an appliance accepts bundles from, by
// name.
type TrustedKeys map[string]ed25519.PublicKey

// ParseTrustedKeys reads a trusted-keys file: one "NAME BASE64-PUBLIC-KEY"
// per line, "#" comments and blank lines ignored. A bad line, a private key
// or a name listed twice is an error naming the line.
func ParseTrustedKeys(b []byte) (TrustedKeys, error) {
	keys := TrustedKeys{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == privateKeyTag {
			return nil, fmt.Errorf("firmware: trusted keys line %d is a PRIVATE signing key; remove it from the appliance", n)
		}
		if len(f) != 2 || !keyNameRE.MatchString(f[0]) {
			return nil, fmt.Errorf("firmware: trusted keys line %d: want NAME BASE64-PUBLIC-KEY", n)
		}
		pub, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("firmware: trusted keys line %d (%s): not a %d-byte base64 ed25519 public key", n, f[0], ed25519.PublicKeySize)
		}
		if _, dup := keys[f[0]]; dup {
			return nil, fmt.Errorf("firmware: trusted keys line %d: %s listed twice", n, f[0])
		}
		keys[f[0]] = ed25519.PublicKey(pub)
	}
	return keys, sc.Err()
}

// LoadTrustedKeys reads the trusted-keys file at path. A missing file is an
// error that says how to make one: an appliance without trusted keys
// accepts no bundle.
func LoadTrustedKeys(path string) (TrustedKeys, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("firmware: no trusted firmware keys (%s is missing): append the release key's line (qubiqctl firmware keygen prints it) to accept bundles", path)
	}
	if err != nil {
		return nil, fmt.Errorf("firmware: trusted keys: %w", err)
	}
	k, err := ParseTrustedKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	if len(k) == 0 {
		return nil, fmt.Errorf("firmware: %s lists no key: no bundle can be accepted", path)
	}
	return k, nil
}
