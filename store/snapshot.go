package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// This file holds the store's hooks for backups and for the A/B firmware
// slots (docs/appliance.md): a consistent copy of the file while the daemon
// runs, a copy of a file nobody has open, and the schema version of a
// file without migrating it.

// Snapshot writes a consistent copy of the whole store file to w from one
// bbolt read transaction (Tx.WriteTo): writers go on meanwhile, and the
// copy is the state at the transaction's start. It returns the bytes
// written. A long copy holds the pages it reads, which keeps freed pages
// from being reused until it ends (see the package caveats).
func (db *DB) Snapshot(w io.Writer) (int64, error) {
	var n int64
	err := db.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: snapshot %s: %w", db.path, err)
	}
	return n, nil
}

// SnapshotTo is Snapshot for writers that must know the size first (a tar
// entry's header): inside the read transaction it calls open with the
// copy's exact size in bytes, then writes the copy to the writer open
// returns. open's error aborts the snapshot.
func (db *DB) SnapshotTo(open func(size int64) (io.Writer, error)) (int64, error) {
	var n int64
	err := db.view(func(tx *bolt.Tx) error {
		w, err := open(tx.Size())
		if err != nil {
			return err
		}
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: snapshot %s: %w", db.path, err)
	}
	return n, nil
}

// FileSchemaVersion opens the store file at path read-only (waiting at most
// timeout for its lock; zero is DefaultOptions.Timeout), reads the schema
// version recorded in it and closes it, without checking it against this
// build's SchemaVersion. A file without a version (new, empty) is 0.
// Errors: fs.ErrNotExist when there is no file, ErrInUse when another
// process holds it past timeout.
func FileSchemaVersion(path string, timeout time.Duration) (uint64, error) {
	var v uint64
	err := withReadOnly(path, timeout, func(tx *bolt.Tx) error {
		var err error
		v, err = readSchemaVersion(tx)
		return err
	})
	return v, err
}

// CopyFile copies the store file at src to dst from one read transaction
// (Tx.CopyFile), with dst's data fsync'd before it returns, and returns the
// schema version recorded in the copy. dst must not exist (it is created
// with mode 0600); write to a temporary name and rename it into place for
// an atomic result. Errors as FileSchemaVersion's.
func CopyFile(src, dst string, timeout time.Duration) (uint64, error) {
	var v uint64
	err := withReadOnly(src, timeout, func(tx *bolt.Tx) error {
		var err error
		if v, err = readSchemaVersion(tx); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, werr := tx.WriteTo(f)
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(dst)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: copy %s to %s: %w", src, filepath.Base(dst), err)
	}
	return v, nil
}

func withReadOnly(path string, timeout time.Duration, fn func(tx *bolt.Tx) error) error {
	if timeout <= 0 {
		timeout = DefaultOptions.Timeout
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("store: open %s: %w (file lock not obtained within %s)", path, ErrInUse, timeout)
		}
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer bdb.Close()
	return bdb.View(fn)
}

// Check runs bbolt's consistency check (Tx.Check, what `bbolt check` does)
// over the whole file in one read transaction and returns every problem
// found, joined; nil for a sound file.
func (db *DB) Check() error {
	var errs []error
	err := db.view(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: check %s: %w", db.path, err)
	}
	return errors.Join(errs...)
}

// DropCredentials deletes, in one write transaction, every API key, every
// session and the meta keys named (a restore onto another appliance drops
// the old one's credentials: its bootstrap-token hash, say), and returns
// how many API keys and sessions it removed. Users (and their password
// hashes) stay.
func (db *DB) DropCredentials(metaKeys ...string) (apiKeys, sessions int, err error) {
	err = db.update(func(tx *bolt.Tx) error {
		for _, c := range []struct {
			name []byte
			n    *int
		}{{bucketAPIKeys, &apiKeys}, {bucketSessions, &sessions}} {
			b := tx.Bucket(c.name)
			if b == nil {
				continue
			}
			*c.n = b.Stats().KeyN
			if err := tx.DeleteBucket(c.name); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(c.name); err != nil {
				return err
			}
		}
		if meta := tx.Bucket(bucketMeta); meta != nil {
			for _, k := range metaKeys {
				if err := meta.Delete([]byte(k)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: drop credentials: %w", err)
	}
	return apiKeys, sessions, nil
}
