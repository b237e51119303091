package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/ed25519"
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
	"sort"
	"strings"
	"time"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
)

// DefaultMaxSize bounds a backup being restored (bytes, uncompressed).
const DefaultMaxSize int64 = 64 << 30

// BootstrapMeta is the store meta key holding the bootstrap token's hash
// (the daemon's, "Credentials on first start"): a restore drops it with the
// API keys unless asked to keep credentials.
const BootstrapMeta = "bootstrap_token_hash"

// RestoreOptions configures Restore.
type RestoreOptions struct {
	// DataDir is the new appliance's data directory. It must not hold a
	// store yet (ErrNotFresh); it may hold a secrets.key (the new
	// appliance's), else one is made.
	DataDir string
	// ProjectDir receives the project files (zero: <DataDir>/restored-project).
	ProjectDir string
	// TrustedKeys, when set, require a signature by one of them.
	TrustedKeys firmware.TrustedKeys
	// Passphrase opens sealed secrets.
	Passphrase []byte
	// KeepCredentials carries the old appliance's API keys, sessions and
	// bootstrap token; by default they are dropped (users and their
	// passwords stay).
	KeepCredentials bool
	// MaxSize bounds the entries' total size (zero: DefaultMaxSize).
	MaxSize int64
	// StoreTimeout is the store's lock wait (zero: 5 s).
	StoreTimeout time.Duration
	// CarryAuditFrom, when set, is the store the restored one replaces
	// (ApplyPending sets it to the store it set aside): its audit log
	// becomes the restored store's, followed by an "appliance.restore"
	// record of the restore applied, so a restore never erases the
	// appliance's audit trail (docs/appliance.md, "Backup and restore").
	// The backup's own audit records stay in the backup file.
	CarryAuditFrom string
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Manifest        *Manifest
	SignedBy        string
	SchemaVersion   uint64 // of the restored store, after migration
	DroppedAPIKeys  int
	DroppedSessions int
	Resealed        []string // connections whose secrets were sealed anew
	ProjectFiles    []string // written under ProjectDir
	AuditCarried    int      // audit records carried from CarryAuditFrom
}

// Restore reads a backup from r into a fresh data directory; see the
// package doc for the steps. Nothing is moved into DataDir before every
// check passed; a failure removes what it staged.
func Restore(ctx context.Context, r io.Reader, opts RestoreOptions) (RestoreResult, error) {
	var res RestoreResult
	if opts.DataDir == "" {
		return res, errors.New("backup: restore: no data directory")
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.ProjectDir == "" {
		opts.ProjectDir = filepath.Join(opts.DataDir, "restored-project")
	}
	dbPath := filepath.Join(opts.DataDir, store.FileName)
	if _, err := os.Stat(dbPath); err == nil {
		return res, fmt.Errorf("%w: %s already holds a store; restore into a fresh data directory (or move qubiq.db away first)", ErrNotFresh, opts.DataDir)
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return res, fmt.Errorf("backup: restore: %w", err)
	}
	stage, err := os.MkdirTemp(opts.DataDir, ".restore-")
	if err != nil {
		return res, fmt.Errorf("backup: restore: %w", err)
	}
	defer os.RemoveAll(stage)

	m, sums, raw, sig, err := unpackAll(ctx, r, stageSink(stage), opts.MaxSize)
	if err != nil {
		return res, err
	}
	if opts.TrustedKeys != nil {
		if res.SignedBy, err = checkSig(raw, sig, opts.TrustedKeys); err != nil {
			return res, err
		}
	}
	if err := matchManifest(m, sums); err != nil {
		return res, err
	}
	res.Manifest = m

	// The store: open (migrates an older schema, refuses a newer), check,
	// credentials, secrets.
	staged := filepath.Join(stage, filepath.FromSlash(StoreEntry))
	db, err := store.Open(staged, store.Options{Timeout: opts.StoreTimeout})
	if err != nil {
		return res, fmt.Errorf("backup: restore: the backup's store: %w", err)
	}
	closeDB := func() error { return db.Close() }
	defer func() {
		if db != nil {
			closeDB()
		}
	}()
	if err := db.Check(); err != nil {
		return res, fmt.Errorf("backup: restore: the backup's store fails its consistency check: %w", err)
	}
	if res.SchemaVersion, err = db.SchemaVersion(); err != nil {
		return res, err
	}
	if !opts.KeepCredentials {
		// An unprovisioned appliance's bootstrap-token hash goes (the daemon
		// makes a new token); a provisioned one's empty marker stays, so no
		// new token is issued and the carried users log in.
		var drop []string
		if h, err := db.Meta(BootstrapMeta); err == nil && len(h) > 0 {
			drop = append(drop, BootstrapMeta)
		}
		if res.DroppedAPIKeys, res.DroppedSessions, err = db.DropCredentials(drop...); err != nil {
			return res, err
		}
	}
	if res.Resealed, err = reseal(db, stage, m, opts); err != nil {
		return res, err
	}
	if opts.CarryAuditFrom != "" {
		if err := carryAudit(db, opts, &res); err != nil {
			return res, err
		}
	}
	if err := closeDB(); err != nil {
		return res, err
	}
	db = nil

	// Everything checked: move into place, the store last.
	for name := range sums {
		switch {
		case name == StoreEntry || strings.HasPrefix(name, "secrets/"):
			continue
		case strings.HasPrefix(name, "project/"):
			dst := filepath.Join(opts.ProjectDir, filepath.FromSlash(strings.TrimPrefix(name, "project/")))
			if err := move(filepath.Join(stage, filepath.FromSlash(name)), dst); err != nil {
				return res, err
			}
			res.ProjectFiles = append(res.ProjectFiles, dst)
		default: // files/..., pki/trusted/...
			if err := move(filepath.Join(stage, filepath.FromSlash(name)), filepath.Join(opts.DataDir, filepath.FromSlash(name))); err != nil {
				return res, err
			}
		}
	}
	sort.Strings(res.ProjectFiles)
	if err := os.Rename(staged, dbPath); err != nil {
		return res, fmt.Errorf("backup: restore: %w", err)
	}
	d, err := os.Open(opts.DataDir)
	if err == nil {
		d.Sync()
		d.Close()
	}
	return res, nil
}

// carryAudit gives the restored store db the audit log of the store at
// opts.CarryAuditFrom, then a record of this restore.
func carryAudit(db *store.DB, opts RestoreOptions, res *RestoreResult) error {
	old, err := store.Open(opts.CarryAuditFrom, store.Options{Timeout: opts.StoreTimeout, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("backup: restore: the store it replaces (for its audit log): %w", err)
	}
	defer old.Close()
	after, _ := json.Marshal(map[string]any{"from_appliance": res.Manifest.ApplianceID, "version": res.Manifest.Version,
		"created": res.Manifest.Created, "schema_version": res.SchemaVersion, "keep_credentials": opts.KeepCredentials,
		"dropped_api_keys": res.DroppedAPIKeys, "dropped_sessions": res.DroppedSessions, "resealed": res.Resealed,
		"previous_store": opts.CarryAuditFrom})
	n, err := db.CarryAuditLog(old, store.AuditRecord{Principal: "qubiqd", Origin: "start", Action: "appliance.restore",
		Target: res.Manifest.ApplianceID, Result: "applied", After: after})
	res.AuditCarried = n
	if err != nil {
		return fmt.Errorf("backup: restore: %w", err)
	}
	return nil
}

// sink receives one entry's bytes; done is called once they are written.
type sink func(name string) (w io.Writer, done func() error, err error)

// stageSink writes entries under dir, fsync'd.
func stageSink(dir string) sink {
	return func(name string) (io.Writer, func() error, error) {
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, nil, err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, nil, err
		}
		return f, func() error { return errors.Join(f.Sync(), f.Close()) }, nil
	}
}

// discardSink checks without writing.
func discardSink(string) (io.Writer, func() error, error) {
	return io.Discard, func() error { return nil }, nil
}

// unpackAll hands every entry to put, hashing it, and returns the manifest
// (read from the end of the stream) with the hashes seen.
func unpackAll(ctx context.Context, r io.Reader, put sink, max int64) (*Manifest, map[string]Entry, []byte, []byte, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	tr := tar.NewReader(gz)
	sums := map[string]Entry{}
	var raw, sig []byte
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, nil, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil, nil, nil, nil, fmt.Errorf("%w: entry %q is not a regular file", ErrFormat, h.Name)
		}
		switch h.Name {
		case ManifestName, SigName:
			b, err := io.ReadAll(io.LimitReader(tr, 16<<20))
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
			}
			if h.Name == ManifestName {
				raw = b
			} else {
				sig = b
			}
			continue
		}
		if raw != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: entry %q after the manifest", ErrFormat, h.Name)
		}
		if err := checkName(h.Name); err != nil {
			return nil, nil, nil, nil, err
		}
		if _, dup := sums[h.Name]; dup {
			return nil, nil, nil, nil, fmt.Errorf("%w: %s appears twice", ErrFormat, h.Name)
		}
		if total += h.Size; total > max {
			return nil, nil, nil, nil, fmt.Errorf("%w: more than %d bytes", ErrFormat, max)
		}
		w, done, err := put(h.Name)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		hs := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, hs), tr)
		if err := errors.Join(err, done()); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("backup: restore %s: %w", h.Name, err)
		}
		sums[h.Name] = Entry{Name: h.Name, Size: n, SHA256: hex.EncodeToString(hs.Sum(nil))}
	}
	if raw == nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: no %s (a truncated backup?)", ErrFormat, ManifestName)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrFormat, ManifestName, err)
	}
	if m.Format != Format || m.Product != firmware.Product {
		return nil, nil, nil, nil, fmt.Errorf("%w: format %d of %q; this build reads format %d of %q", ErrFormat, m.Format, m.Product, Format, firmware.Product)
	}
	return &m, sums, raw, sig, nil
}

func checkName(n string) error {
	c := path.Clean(n)
	if c != n || path.IsAbs(n) || strings.HasPrefix(n, "../") || n == ".." || strings.Contains(n, "\\") {
		return fmt.Errorf("%w: entry name %q", ErrFormat, n)
	}
	for _, p := range []string{"store/", "project/", "files/", "pki/trusted/", "secrets/"} {
		if strings.HasPrefix(n, p) {
			return nil
		}
	}
	return fmt.Errorf("%w: entry %q is not a part of a backup", ErrFormat, n)
}

func checkSig(raw, sig []byte, keys firmware.TrustedKeys) (string, error) {
	f := strings.Fields(string(sig))
	if len(f) != 3 || f[0] != "ed25519" {
		return "", fmt.Errorf("%w: the backup is not signed", ErrSignature)
	}
	pub, ok := keys[f[1]]
	if !ok {
		return f[1], fmt.Errorf("%w: key %q is not trusted", ErrSignature, f[1])
	}
	s, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || !ed25519.Verify(pub, append([]byte(sigContext), raw...), s) {
		return f[1], fmt.Errorf("%w: the signature by %q does not match", ErrSignature, f[1])
	}
	return f[1], nil
}

func matchManifest(m *Manifest, sums map[string]Entry) error {
	listed := map[string]bool{}
	for _, e := range m.Entries {
		listed[e.Name] = true
		got, ok := sums[e.Name]
		if !ok {
			return fmt.Errorf("%w: %s is listed but missing", ErrHash, e.Name)
		}
		if got.Size != e.Size || got.SHA256 != e.SHA256 {
			return fmt.Errorf("%w: %s (sha256 %s, the manifest says %s)", ErrHash, e.Name, got.SHA256, e.SHA256)
		}
	}
	for n := range sums {
		if !listed[n] {
			return fmt.Errorf("%w: %s is not listed in the manifest", ErrHash, n)
		}
	}
	if !listed[StoreEntry] {
		return fmt.Errorf("%w: no store in the backup", ErrFormat)
	}
	return nil
}

// reseal opens the backup's connection secrets with the old key and seals
// them with the new appliance's secrets.key (made when missing).
func reseal(db *store.DB, stage string, m *Manifest, opts RestoreOptions) ([]string, error) {
	recs, err := db.Connections()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	var oldKey []byte
	switch m.Secrets {
	case "plain":
		oldKey, err = os.ReadFile(filepath.Join(stage, filepath.FromSlash(keyPlain)))
	case "sealed":
		var sealed []byte
		if sealed, err = os.ReadFile(filepath.Join(stage, filepath.FromSlash(keySealed))); err == nil {
			if len(opts.Passphrase) == 0 {
				return nil, fmt.Errorf("%w: the backup's secrets are sealed; give the passphrase", ErrPassword)
			}
			oldKey, err = openKey(sealed, opts.Passphrase)
		}
	default:
		return nil, fmt.Errorf("backup: restore: %d connection secrets but no key in the backup", len(recs))
	}
	if err != nil {
		return nil, fmt.Errorf("backup: restore: secrets key: %w", err)
	}
	from, err := sqldb.SecretsFromKey(oldKey)
	if err != nil {
		return nil, err
	}
	to, err := sqldb.LoadSecrets(filepath.Join(opts.DataDir, sqldb.KeyFile), nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for name, rec := range recs {
		nr, err := sqldb.ResealRecord(name, rec, from, to)
		if err != nil {
			return nil, fmt.Errorf("backup: restore: %w", err)
		}
		if err := db.PutConnection(name, nr); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

func move(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("backup: restore: %w", err)
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("backup: restore: %s exists; restore into a fresh data directory: %w", dst, fs.ErrExist)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("backup: restore: %w", err)
	}
	return nil
}
