package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/store/sqldb"
)

// Format is the backup format this build writes and reads.
const Format = 1

// Entry names.
const (
	ManifestName = "backup.json"
	SigName      = "backup.sig"
	StoreEntry   = "store/qubiq.db"
	keyPlain     = "secrets/secrets.key"
	keySealed    = "secrets/secrets.key.sealed"
	sigContext   = "qubiq-backup-v1\n"
)

// Errors a refused backup wraps.
var (
	ErrFormat    = errors.New("not a valid QUBIQ backup")
	ErrHash      = errors.New("backup entry does not match its manifest")
	ErrSignature = errors.New("backup signature missing or not trusted")
	ErrNotFresh  = errors.New("data directory is not fresh")
	ErrPassword  = errors.New("the secrets in the backup need the right passphrase")
)

// Store is what Write needs of the running store: store.DB's SnapshotTo.
type Store interface {
	SnapshotTo(open func(size int64) (io.Writer, error)) (int64, error)
}

// Manifest is backup.json.
type Manifest struct {
	Format      int       `json:"format"`
	Product     string    `json:"product"`
	Created     time.Time `json:"created"`
	ApplianceID string    `json:"appliance_id,omitempty"`
	Version     string    `json:"version,omitempty"` // the daemon that wrote it
	// Secrets is "plain" (secrets.key as is: keep the file like the data
	// directory itself), "sealed" (under a passphrase) or "none".
	Secrets string  `json:"secrets"`
	Entries []Entry `json:"entries"`
}

// Entry is one file of the backup.
type Entry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// WriteOptions configures Write.
type WriteOptions struct {
	// Store is the running store (required).
	Store Store
	// DataDir is the data directory: secrets.key, files/ and pki/trusted/
	// are taken from it when present.
	DataDir string
	// ProjectDir and ProjectFiles: the project file and the files it names
	// (scripts), as paths relative to ProjectDir; kept under project/.
	ProjectDir   string
	ProjectFiles []string
	ApplianceID  string
	Version      string
	// Key signs the manifest (optional).
	Key *firmware.SigningKey
	// Passphrase, when set, seals secrets.key (argon2id, AES-256-GCM);
	// without it the key is stored as is and the backup must be kept as
	// carefully as the appliance's data directory.
	Passphrase []byte
}

// Write streams a backup to w and returns its manifest. The store snapshot
// is one read transaction: writers go on, and the snapshot is consistent at
// its start. Files under files/ and pki/trusted/ are read as they are when
// reached.
func Write(ctx context.Context, w io.Writer, opts WriteOptions) (*Manifest, error) {
	if opts.Store == nil {
		return nil, errors.New("backup: no store")
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	m := &Manifest{Format: Format, Product: firmware.Product, Created: time.Now().UTC(), ApplianceID: opts.ApplianceID, Version: opts.Version, Secrets: "none"}
	now := m.Created
	add := func(name string, size int64, write func(io.Writer) error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: size, ModTime: now, Format: tar.FormatPAX}); err != nil {
			return err
		}
		h := sha256.New()
		cw := &countWriter{w: io.MultiWriter(tw, h)}
		if err := write(cw); err != nil {
			return err
		}
		if cw.n != size {
			return fmt.Errorf("%s: wrote %d bytes, announced %d", name, cw.n, size)
		}
		m.Entries = append(m.Entries, Entry{Name: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	}
	addFile := func(name, src string) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return add(name, fi.Size(), func(w io.Writer) error {
			_, err := io.Copy(w, io.LimitReader(f, fi.Size()))
			return err
		})
	}
	var entryErr error
	snapHash := sha256.New()
	var snap *countWriter
	var snapSize int64
	_, err := opts.Store.SnapshotTo(func(size int64) (io.Writer, error) {
		if err := tw.WriteHeader(&tar.Header{Name: StoreEntry, Typeflag: tar.TypeReg, Mode: 0o600, Size: size, ModTime: now, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		snapSize = size
		snap = &countWriter{w: io.MultiWriter(tw, snapHash)}
		return snap, nil
	})
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if snap == nil || snap.n != snapSize {
		return nil, errors.New("backup: the store snapshot did not write its announced size")
	}
	m.Entries = append(m.Entries, Entry{Name: StoreEntry, Size: snapSize, SHA256: hex.EncodeToString(snapHash.Sum(nil))})
	for _, p := range opts.ProjectFiles {
		clean := path.Clean(filepath.ToSlash(p))
		if path.IsAbs(clean) || strings.HasPrefix(clean, "../") || clean == ".." {
			return nil, fmt.Errorf("backup: project file %q is not inside %s", p, opts.ProjectDir)
		}
		if err := addFile("project/"+clean, filepath.Join(opts.ProjectDir, filepath.FromSlash(clean))); err != nil {
			return nil, fmt.Errorf("backup: project file: %w", err)
		}
	}
	if opts.DataDir != "" {
		for _, sub := range []string{"files", "pki/trusted"} {
			root := filepath.Join(opts.DataDir, filepath.FromSlash(sub))
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if errors.Is(err, fs.ErrNotExist) && p == root {
					return filepath.SkipDir
				}
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				rel, _ := filepath.Rel(opts.DataDir, p)
				return addFile(filepath.ToSlash(rel), p)
			})
			if err != nil && !errors.Is(err, filepath.SkipDir) {
				return nil, fmt.Errorf("backup: %s: %w", sub, err)
			}
		}
		key, err := os.ReadFile(filepath.Join(opts.DataDir, sqldb.KeyFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("backup: %w", err)
		case len(opts.Passphrase) > 0:
			sealed, err := sealKey(key, opts.Passphrase)
			if err != nil {
				return nil, err
			}
			m.Secrets = "sealed"
			entryErr = add(keySealed, int64(len(sealed)), func(w io.Writer) error { _, err := w.Write(sealed); return err })
		default:
			m.Secrets = "plain"
			entryErr = add(keyPlain, int64(len(key)), func(w io.Writer) error { _, err := w.Write(key); return err })
		}
		if entryErr != nil {
			return nil, fmt.Errorf("backup: secrets: %w", entryErr)
		}
	}
	raw, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	if err := writeSmall(tw, ManifestName, raw, now); err != nil {
		return nil, err
	}
	if opts.Key != nil {
		sig := ed25519.Sign(opts.Key.Key, append([]byte(sigContext), raw...))
		line := fmt.Appendf(nil, "ed25519 %s %s\n", opts.Key.Name, base64.StdEncoding.EncodeToString(sig))
		if err := writeSmall(tw, SigName, line, now); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

func writeSmall(tw *tar.Writer, name string, b []byte, t time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(b)), ModTime: t, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// sealKey seals the secrets key under a passphrase: salt (16) | nonce (12)
// | AES-256-GCM(argon2id(passphrase, salt)).
func sealKey(key, pass []byte) ([]byte, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	aead, err := passAEAD(pass, salt)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append(append(salt, nonce...), aead.Seal(nil, nonce, key, []byte(sigContext))...)
	return out, nil
}

func openKey(sealed, pass []byte) ([]byte, error) {
	if len(sealed) < 16+12 {
		return nil, fmt.Errorf("%w: sealed key too short", ErrFormat)
	}
	aead, err := passAEAD(pass, sealed[:16])
	if err != nil {
		return nil, err
	}
	key, err := aead.Open(nil, sealed[16:28], sealed[28:], []byte(sigContext))
	if err != nil {
		return nil, ErrPassword
	}
	return key, nil
}

func passAEAD(pass, salt []byte) (cipher.AEAD, error) {
	k := argon2.IDKey(pass, salt, 2, 64*1024, 2, 32)
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
