package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the bbolt file inside the data directory
// (docs/config.md, "Data directory").
const FileName = "qubiq.db"

// Sentinel errors. Compare with errors.Is; the errors returned wrap them with
// the subject (file, key, module).
var (
	// ErrInUse is wrapped by Open when another process (or another Open in
	// this process) holds the file's lock past Options.Timeout, where bbolt
	// alone would wait forever (bbolt README, "Opening a database"). The
	// error names the file and the time waited.
	ErrInUse = errors.New("database is in use by another process")

	// ErrSchemaTooNew is wrapped by Open when the file's schema version is
	// newer than SchemaVersion: it was written by a newer build, and this
	// build refuses to touch it rather than misread it.
	ErrSchemaTooNew = errors.New("schema version is newer than this build knows")

	// ErrNotFound is wrapped when an API key, script or script version does
	// not exist. Errors for API keys also match auth.ErrNotFound, so the
	// store satisfies auth.KeyStore's contract.
	ErrNotFound = errors.New("not found")

	// ErrClosed is returned by every method of a DB after Close, and by
	// AuditLog.Enqueue and Flush after the AuditLog's Close.
	ErrClosed = errors.New("store closed")

	// ErrReadOnly is wrapped by every write on a DB opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("store opened read-only")

	// ErrInvalid is wrapped when an argument cannot be stored: an empty or
	// over-long key, a document that is not JSON, an unknown scope.
	ErrInvalid = errors.New("invalid argument")
)

// Options configures Open.
type Options struct {
	// Timeout is how long Open waits for the file lock before it fails with
	// ErrInUse (docs/config.md config "store.open_timeout"). Zero or negative
	// means DefaultOptions.Timeout: the wait is never unbounded.
	Timeout time.Duration

	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger

	// ReadOnly opens the file with a shared lock for reading only (the CLI's
	// offline export). It neither creates the file nor migrates it; a file
	// whose schema is older than SchemaVersion is refused. Writes fail with
	// ErrReadOnly. A read-only open still waits at most Timeout while a
	// writer holds the lock: bbolt's shared lock waits for the writer's
	// exclusive one like any other opener.
	ReadOnly bool
}

// DefaultOptions are the options used for zero fields of Options: a 5 s
// lock timeout (docs/config.md, config "store.open_timeout: 5s").
var DefaultOptions = Options{Timeout: 5 * time.Second}

// DB is the open store. Its methods are safe for concurrent use. Close it
// once; every method returns ErrClosed afterwards.
type DB struct {
	bolt   *bolt.DB
	path   string
	logger *slog.Logger
	now    func() time.Time

	lvScratch lvScratchSlot // the last-values save's buffers (lastvalues_scratch.go)
}

// Open opens (and, unless opts.ReadOnly, creates) the store file at path.
// It creates the parent directory with mode 0700 and the file with mode
// 0600, waits at most opts.Timeout for the file lock, then creates the
// buckets and runs the schema migrations up to SchemaVersion in one
// transaction.
//
// Errors: ErrInUse when the lock is held past the timeout (the message says
// "database is in use by another process" and names the file);
// ErrSchemaTooNew when the file was written by a newer build; otherwise the
// failing step, wrapped, naming the file.
func Open(path string, opts Options) (*DB, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultOptions.Timeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" {
		return nil, fmt.Errorf("store: open: empty path: %w", ErrInvalid)
	}
	if !opts.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store: open %s: create directory: %w", path, err)
		}
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:  opts.Timeout,
		ReadOnly: opts.ReadOnly,
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("store: open %s: %w (file lock not obtained within %s)", path, ErrInUse, opts.Timeout)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, logger: logger, now: time.Now}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		logger.Warn("store file is readable by other users", slog.String("path", path), slog.String("mode", fi.Mode().Perm().String()))
	}
	var version uint64
	if opts.ReadOnly {
		version, err = db.checkSchema()
	} else {
		version, err = db.migrate(migrations)
		if err == nil {
			err = db.moveLegacyLastValues()
		}
	}
	if err != nil {
		if cerr := bdb.Close(); cerr != nil {
			logger.Error("store close after failed open", slog.String("path", path), slog.Any("err", cerr))
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	logger.Info("store opened", slog.String("path", path), slog.Uint64("schema_version", version), slog.Bool("read_only", opts.ReadOnly))
	return db, nil
}

// Path returns the file the DB was opened on.
func (db *DB) Path() string { return db.path }

// Close releases the file and its lock. It waits for running transactions.
// Methods called after Close return ErrClosed; a second Close returns nil.
func (db *DB) Close() error {
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", db.path, err)
	}
	return nil
}

// view runs fn in a read transaction, mapping bbolt's errors onto ours.
func (db *DB) view(fn func(tx *bolt.Tx) error) error {
	return mapErr(db.bolt.View(fn))
}

// update runs fn in a write transaction committed (and fsync'd) before it
// returns; fn's error rolls the transaction back.
func (db *DB) update(fn func(tx *bolt.Tx) error) error {
	return mapErr(db.bolt.Update(fn))
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return ErrClosed
	case errors.Is(err, berrors.ErrDatabaseReadOnly):
		return ErrReadOnly
	}
	return err
}

// bucket returns the top-level bucket name of tx. The buckets are made by
// migration 1, so a missing one is a corrupt or foreign file.
func bucket(tx *bolt.Tx, name []byte) (*bolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("bucket %q missing (not a QUBIQ store, or damaged)", name)
	}
	return b, nil
}

// clone copies b out of a transaction; nil stays nil.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// u64Key encodes n as an 8-byte big-endian key, so that byte order is
// numeric order (as decimal strings, "10" would sort before "9").
func u64Key(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// keyU64 decodes an 8-byte big-endian key.
func keyU64(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("key %x: want 8 bytes, have %d", k, len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}

// checkKey refuses keys bbolt cannot hold.
func checkKey(what, k string) error {
	if k == "" {
		return fmt.Errorf("store: empty %s: %w", what, ErrInvalid)
	}
	if len(k) > bolt.MaxKeySize {
		return fmt.Errorf("store: %s of %d bytes is over %d: %w", what, len(k), bolt.MaxKeySize, ErrInvalid)
	}
	return nil
}

// notFoundError is ErrNotFound with its subject. For API keys it also
// matches auth.ErrNotFound (auth.KeyStore's contract).
type notFoundError struct {
	what, id string
	auth     bool
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("store: %s %q: %s", e.what, e.id, ErrNotFound)
}

func (e *notFoundError) Is(target error) bool {
	return target == ErrNotFound || (e.auth && target == authErrNotFound)
}

// scanChunk is scan's default number of keys per read transaction.
const scanChunk = 1000

// scan calls fn with copies of the keys and values of the top-level bucket
// name, in key order, starting at the first key >= from (nil: the first).
// It reads in short transactions of at most chunk keys (<= 0: scanChunk)
// and calls fn between them, outside any transaction, so a slow consumer
// (an export to a slow client) never keeps a transaction open and freed
// pages stay reusable (bbolt README, "Caveats & Limitations": old pages
// cannot be reclaimed while a transaction still reads them). Writes made
// during the scan are seen or not, chunk by chunk. fn's error stops the scan and is returned.
func (db *DB) scan(name, from []byte, chunk int, fn func(k, v []byte) error) error {
	if chunk <= 0 {
		chunk = scanChunk
	}
	type kv struct{ k, v []byte }
	next := clone(from)
	for {
		var batch []kv
		err := db.view(func(tx *bolt.Tx) error {
			b, err := bucket(tx, name)
			if err != nil {
				return err
			}
			c := b.Cursor()
			k, v := c.First()
			if next != nil {
				k, v = c.Seek(next)
			}
			for ; k != nil && len(batch) < chunk; k, v = c.Next() {
				batch = append(batch, kv{clone(k), clone(v)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range batch {
			if err := fn(e.k, e.v); err != nil {
				return err
			}
		}
		if len(batch) < chunk {
			return nil
		}
		// Resume just after the last key: the smallest key above it.
		next = append(batch[len(batch)-1].k, 0)
	}
}
