package sqldb

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"fmt"
)

// This file holds what a restore onto another appliance needs: the
// connection secrets of a backup were sealed under the old appliance's
// secrets.key, and are sealed again under the new one's (docs/appliance.md,
// "Backup and restore").

// SecretsFromKey returns Secrets for a raw 32-byte key: the old
// appliance's key carried in a backup. It is never written to the new data
// directory.
func SecretsFromKey(key []byte) (*Secrets, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("sqldb: secrets key: %d bytes, want %d", len(key), keySize)
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

// ResealRecord takes a stored connection record (as the ConnStore keeps
// it), opens its DSN with from and returns the record with the DSN sealed
// by to. A record that does not open wraps ErrSecretUnreadable.
func ResealRecord(name string, rec []byte, from, to *Secrets) ([]byte, error) {
	var sc storedConn
	if err := json.Unmarshal(rec, &sc); err != nil {
		return nil, fmt.Errorf("sqldb: connection %q: stored record unreadable: %w", name, err)
	}
	dsn, err := from.Open(name, sc.Sealed)
	if err != nil {
		return nil, err
	}
	if sc.Sealed, err = to.Seal(name, dsn); err != nil {
		return nil, err
	}
	return json.Marshal(sc)
}
