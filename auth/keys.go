package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Token prefixes. An API key token is "qbq_<id>_<secret>"; the bootstrap
// token is "qbb_<secret>". The id is 16 hex digits, the secret 43 base64url
// characters (32 random bytes).
const (
	apiKeyPrefix    = "qbq_"
	bootstrapPrefix = "qbb_"
)

// ErrBadCredentials is returned by Keys.Authenticate when the token is not a
// valid, unrevoked, unexpired credential. It never says which part failed.
var ErrBadCredentials = errors.New("invalid or revoked credentials")

// ErrRevokedToken and ErrExpiredToken are returned by Keys.Authenticate for
// a key whose secret is right but that was revoked or is expired; both are ErrBadCredentials
// (errors.Is). They are for the audit record of the refusal; the client's
// answer stays the same for every refused token.
var (
	ErrRevokedToken = fmt.Errorf("%w: revoked", ErrBadCredentials)
	ErrExpiredToken = fmt.Errorf("%w: expired", ErrBadCredentials)
)

// ErrNotFound is what a KeyStore returns (wrapped) for an unknown key id.
var ErrNotFound = errors.New("not found")

// KeyRecord is an API key as stored: the SHA-256 of its secret (the token is
// shown once and never stored), and what it may do.
type KeyRecord struct {
	ID          string
	Name        string
	Hash        []byte
	Scopes      []Scope
	WriteLevel  Level
	Permissions []Permission
	Prefixes    []string
	Expires     time.Time // zero: never
	Created     time.Time
	Revoked     bool
}

// KeyStore persists API keys. The service layer passes the store's implementation.
// Key returns an error wrapping ErrNotFound for an unknown id.
type KeyStore interface {
	PutKey(k KeyRecord) error
	Key(id string) (KeyRecord, error)
	Keys() ([]KeyRecord, error)
}

// Keys issues and checks API keys and the one-time bootstrap token
// (README: demo walk-through, API keys and the bootstrap token).
// Revocation takes effect at once: every Authenticate reads the store.
type Keys struct {
	store KeyStore
	now   func() time.Time

	mu            sync.RWMutex
	bootstrapHash []byte // nil: no bootstrap token is valid
}

// NewKeys returns a Keys over store.
func NewKeys(store KeyStore) *Keys { return &Keys{store: store, now: time.Now} }

// NewBootstrapToken returns a fresh bootstrap token and the hash to keep
// (SetBootstrapHash). The token holds every permission and every scope at
// level design until RevokeBootstrap.
func NewBootstrapToken() (token string, hash []byte, err error) {
	secret, err := randomSecret()
	if err != nil {
		return "", nil, err
	}
	h := sha256.Sum256([]byte(secret))
	return bootstrapPrefix + secret, h[:], nil
}

// SetBootstrapHash makes the bootstrap token with this hash valid (nil: none).
func (k *Keys) SetBootstrapHash(hash []byte) {
	k.mu.Lock()
	k.bootstrapHash = hash
	k.mu.Unlock()
}

// BootstrapActive reports whether a bootstrap token is valid.
func (k *Keys) BootstrapActive() bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.bootstrapHash != nil
}

// Create issues a new API key limited to rec's scopes, level, permissions,
// prefixes and expiry, and returns its id and the token (shown once). The
// creator's grant bounds it (Grant.Covers): a key never gets a scope,
// permission, level or tag path its creator lacks, and a creator limited
// to prefixes must name prefixes inside its own; the refusal is a
// *DeniedError of kind "wider" naming what, and the creator's prefixes.
// An unknown scope or permission is an error naming it.
func (k *Keys) Create(creator Grant, rec KeyRecord) (id, token string, err error) {
	for _, s := range rec.Scopes {
		if _, err := ParseScope(string(s)); err != nil {
			return "", "", err
		}
	}
	for _, p := range rec.Permissions {
		if _, err := ParsePermission(string(p)); err != nil {
			return "", "", err
		}
	}
	want := Grant{Scopes: rec.Scopes, Permissions: rec.Permissions, WriteLevel: rec.WriteLevel, Prefixes: rec.Prefixes}
	if err := creator.Covers(want, "new API key"); err != nil {
		return "", "", err
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", "", fmt.Errorf("api key: random id: %w", err)
	}
	secret, err := randomSecret()
	if err != nil {
		return "", "", err
	}
	rec.ID = hex.EncodeToString(idb[:])
	h := sha256.Sum256([]byte(secret))
	rec.Hash = h[:]
	rec.Created = k.now().UTC()
	if err := k.store.PutKey(rec); err != nil {
		return "", "", fmt.Errorf("api key %q: store: %w", rec.Name, err)
	}
	return rec.ID, apiKeyPrefix + rec.ID + "_" + secret, nil
}

// Authenticate returns the grant of token: an API key's scopes, level,
// permissions and prefixes (realm RealmAPIKey, principal "apikey:<name>"),
// or the full grant of the bootstrap token. It returns ErrBadCredentials for
// anything else: ErrRevokedToken and ErrExpiredToken (both
// ErrBadCredentials) for a right secret of a revoked or expired key.
func (k *Keys) Authenticate(token string) (Grant, error) {
	switch {
	case strings.HasPrefix(token, bootstrapPrefix):
		k.mu.RLock()
		want := k.bootstrapHash
		k.mu.RUnlock()
		h := sha256.Sum256([]byte(strings.TrimPrefix(token, bootstrapPrefix)))
		if want == nil || subtle.ConstantTimeCompare(h[:], want) != 1 {
			return Grant{}, ErrBadCredentials
		}
		return Full("bootstrap", RealmBootstrap, "rest"), nil
	case strings.HasPrefix(token, apiKeyPrefix):
		rest := strings.TrimPrefix(token, apiKeyPrefix)
		id, secret, ok := strings.Cut(rest, "_")
		if !ok || len(id) != 16 {
			return Grant{}, ErrBadCredentials
		}
		rec, err := k.store.Key(id)
		if err != nil {
			return Grant{}, ErrBadCredentials
		}
		h := sha256.Sum256([]byte(secret))
		switch {
		case subtle.ConstantTimeCompare(h[:], rec.Hash) != 1:
			return Grant{}, ErrBadCredentials
		case rec.Revoked:
			return Grant{}, ErrRevokedToken
		case expiredAt(rec.Expires, k.now()):
			return Grant{}, ErrExpiredToken
		}
		return Grant{Principal: "apikey:" + rec.Name, Realm: RealmAPIKey, Origin: "rest",
			Scopes: rec.Scopes, WriteLevel: rec.WriteLevel, Permissions: rec.Permissions,
			Prefixes: rec.Prefixes, Expires: rec.Expires, KeyID: rec.ID}, nil
	}
	return Grant{}, ErrBadCredentials
}

// Revoke marks the key id revoked; it fails with an error wrapping
// ErrNotFound for an unknown id.
func (k *Keys) Revoke(id string) error {
	rec, err := k.store.Key(id)
	if err != nil {
		return err
	}
	rec.Revoked = true
	return k.store.PutKey(rec)
}

// Record returns the stored key id, revoked or not (its hash included;
// callers must not expose it). An unknown id wraps ErrNotFound.
func (k *Keys) Record(id string) (KeyRecord, error) { return k.store.Key(id) }

// List returns every key (hashes included; callers must not expose them).
func (k *Keys) List() ([]KeyRecord, error) { return k.store.Keys() }

func randomSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// StillValid reports (nil) whether the credential g came from is still
// valid now: its API key not revoked or expired, the bootstrap token not
// revoked by provisioning. Calls made during a long script run check it, so
// a revocation takes effect at once, not when the run ends. It returns a
// *DeniedError of kind "revoked" otherwise.
func (k *Keys) StillValid(g Grant) error {
	switch g.Realm {
	case RealmAPIKey:
		if g.KeyID == "" {
			return nil
		}
		rec, err := k.store.Key(g.KeyID)
		if err != nil || rec.Revoked {
			return &DeniedError{Kind: "revoked", Need: "a current credential: API key " + g.KeyID + " was revoked"}
		}
		if expiredAt(rec.Expires, k.now()) {
			return &DeniedError{Kind: "revoked", Need: "a current credential: API key " + g.KeyID + " expired"}
		}
	case RealmBootstrap:
		if !k.BootstrapActive() {
			return &DeniedError{Kind: "revoked", Need: "a current credential: the bootstrap token was revoked by provisioning"}
		}
	}
	return nil
}
