package sqldb

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"qubiq.dev/edge/internal/atomicfile"
)

// Secret is a connection secret (a DSN) held in memory. It prints, logs and
// marshals as "[redacted]"; only Reveal gives the text, for the driver.
type Secret struct{ s string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{s: s} }

// Reveal returns the secret text. Call it only to hand it to a driver.
func (s Secret) Reveal() string { return s.s }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.s == "" }

// String returns "[redacted]".
func (Secret) String() string { return "[redacted]" }

// GoString returns "[redacted]" (for %#v).
func (Secret) GoString() string { return "[redacted]" }

// LogValue keeps the secret out of slog output.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalJSON encodes "[redacted]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// MarshalText encodes "[redacted]".
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// KeyFile is the name of the key file in the data directory (docs/config.md,
// "Data directory": secrets.key).
const KeyFile = "secrets.key"

const keySize = 32

// Secrets seals and opens connection secrets with AES-256-GCM under the
// key in <data_dir>/secrets.key.
type Secrets struct{ aead cipher.AEAD }

// LoadSecrets reads the 32-byte key at path, creating it (random, mode
// 0600, written atomically) when it does not exist. A key file of another
// size is an error; a key readable by other users is logged as a warning.
func LoadSecrets(path string, logger *slog.Logger) (*Secrets, error) {
	key, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		key = make([]byte, keySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("sqldb: secrets key: %w", err)
		}
		if err := writeKey(path, key); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("sqldb: secrets key %s: %w", path, err)
	case len(key) != keySize:
		return nil, fmt.Errorf("sqldb: secrets key %s: %d bytes, want %d (restore it from a backup; secrets sealed with another key cannot be opened)", path, len(key), keySize)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 && logger != nil {
		logger.Warn("secrets key is readable by other users", slog.String("path", path), slog.String("mode", fi.Mode().Perm().String()))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sqldb: secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("sqldb: secrets key: %w", err)
	}
	return &Secrets{aead: aead}, nil
}

func writeKey(path string, key []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("sqldb: secrets key: %w", err)
	}
	if err := atomicfile.WriteFile(path, key, 0o600); err != nil {
		return fmt.Errorf("sqldb: write secrets key %s: %w", path, err)
	}
	return nil
}

// Seal encrypts s for the connection name (the name is authenticated, so
// a sealed secret moved to another connection does not open).
func (k *Secrets) Seal(name string, s Secret) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("sqldb: seal secret of %q: %w", name, err)
	}
	return k.aead.Seal(nonce, nonce, []byte(s.s), []byte("qubiq-conn-v1\n"+name)), nil
}

// ErrSecretUnreadable is wrapped when a sealed secret does not open: the
// key changed or the record was tampered with.
var ErrSecretUnreadable = errors.New("sealed secret does not open with secrets.key")

// Open decrypts a secret sealed for the connection name.
func (k *Secrets) Open(name string, sealed []byte) (Secret, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return Secret{}, fmt.Errorf("sqldb: secret of %q: %w", name, ErrSecretUnreadable)
	}
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], []byte("qubiq-conn-v1\n"+name))
	if err != nil {
		return Secret{}, fmt.Errorf("sqldb: secret of %q: %w", name, ErrSecretUnreadable)
	}
	return Secret{s: string(plain)}, nil
}

// scrub removes the secret's text, and any password it holds, from msg.
func scrub(msg string, s Secret) string {
	if s.s == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, s.s, "[redacted dsn]")
	for _, pw := range passwords(s.s) {
		if len(pw) >= 3 {
			msg = strings.ReplaceAll(msg, pw, "[redacted]")
		}
	}
	return msg
}

// passwords finds the passwords in a DSN: URL userinfo
// (postgres://user:pw@host) and key=value (password=pw).
func passwords(dsn string) []string {
	var out []string
	if i := strings.Index(dsn, "://"); i >= 0 {
		rest := dsn[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				out = append(out, pw)
			}
		}
	}
	for _, f := range strings.FieldsFunc(dsn, func(r rune) bool { return r == ' ' || r == '&' || r == '?' }) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			out = append(out, strings.Trim(v, "'"))
		}
	}
	return out
}

// scrubbedError is an error whose text had a secret removed; it still
// unwraps to the original for errors.Is/As.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

func scrubErr(err error, s Secret) error {
	if err == nil || s.s == "" {
		return err
	}
	msg := scrub(err.Error(), s)
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}
