package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"qubiq.dev/edge/store"
)

// A restore onto a running appliance is staged: the daemon (POST
// /api/v1/restore) checks the upload and keeps it as
// <data_dir>/restore/pending.qbk, exits with status 75, and at its next
// start applies it before it opens the store (ApplyPending).
const (
	PendingDir  = "restore"
	PendingFile = "pending.qbk"
	ResultFile  = "last-result.json"
)

// Verify reads a whole backup from r and checks it (every entry's hash,
// the signature when opts.TrustedKeys is set, and that opts.Passphrase
// opens secrets sealed with one: ErrPassword when it is missing or wrong)
// without writing anything.
func Verify(ctx context.Context, r io.Reader, opts RestoreOptions) (*Manifest, error) {
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	var sealed bytes.Buffer
	keep := func(name string) (io.Writer, func() error, error) {
		if name == keySealed {
			return &sealed, func() error { return nil }, nil
		}
		return discardSink(name)
	}
	m, sums, raw, sig, err := unpackAll(ctx, r, keep, opts.MaxSize)
	if err != nil {
		return nil, err
	}
	if opts.TrustedKeys != nil {
		if _, err := checkSig(raw, sig, opts.TrustedKeys); err != nil {
			return nil, err
		}
	}
	if err := matchManifest(m, sums); err != nil {
		return m, err
	}
	if m.Secrets == "sealed" {
		if len(opts.Passphrase) == 0 {
			return m, fmt.Errorf("%w: the backup's secrets are sealed; give the passphrase", ErrPassword)
		}
		if _, err := openKey(sealed.Bytes(), opts.Passphrase); err != nil {
			if errors.Is(err, ErrPassword) {
				return m, err // it says so itself
			}
			return m, fmt.Errorf("%w: %v", ErrPassword, err)
		}
	}
	return m, nil
}

// StagePending checks the backup read from r (Verify) while spooling it to
// <DataDir>/restore, and keeps it as pending.qbk once every check passed.
// A refused backup leaves nothing behind.
func StagePending(ctx context.Context, r io.Reader, opts RestoreOptions) (*Manifest, error) {
	dir := filepath.Join(opts.DataDir, PendingDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backup: stage: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".incoming-*")
	if err != nil {
		return nil, fmt.Errorf("backup: stage: %w", err)
	}
	defer os.Remove(tmp.Name())
	m, err := Verify(ctx, io.TeeReader(r, tmp), opts)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, PendingFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		os.Remove(dir) // when empty
		return nil, err
	}
	return m, nil
}

// ApplyPending restores a staged backup, if there is one, into
// opts.DataDir; the daemon calls it before it opens the store. The store
// found there (a fresh appliance's) is kept beside it as
// qubiq.db.before-restore-<time> and put back if the restore fails. The
// outcome is written to restore/last-result.json and the pending file
// removed either way. It reports whether a restore was applied.
func ApplyPending(ctx context.Context, opts RestoreOptions) (bool, RestoreResult, error) {
	dir := filepath.Join(opts.DataDir, PendingDir)
	pending := filepath.Join(dir, PendingFile)
	f, err := os.Open(pending)
	if errors.Is(err, fs.ErrNotExist) {
		return false, RestoreResult{}, nil
	}
	if err != nil {
		return false, RestoreResult{}, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(pending)
	}()
	// What a restore writes into is set aside first (and put back when it
	// fails): the store, and the project, files and trusted certificates an
	// earlier restore (or the running appliance) left, so an appliance can
	// be restored again.
	projectDir := opts.ProjectDir
	if projectDir == "" {
		projectDir = filepath.Join(opts.DataDir, "restored-project")
	}
	db := filepath.Join(opts.DataDir, store.FileName)
	suffix := ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
	aside := db + suffix
	var moved [][2]string // {original, aside}
	putBack := func() error {
		var errs []error
		for i := len(moved) - 1; i >= 0; i-- {
			os.RemoveAll(moved[i][0]) // what the failed restore may have left
			if err := os.Rename(moved[i][1], moved[i][0]); err != nil {
				errs = append(errs, fmt.Errorf("putting %s back: %w", moved[i][0], err))
			}
		}
		return errors.Join(errs...)
	}
	for _, p := range []string{db, projectDir, filepath.Join(opts.DataDir, "files"), filepath.Join(opts.DataDir, "pki", "trusted")} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.Rename(p, p+suffix); err != nil {
			return false, RestoreResult{}, errors.Join(fmt.Errorf("backup: %w", err), putBack())
		}
		moved = append(moved, [2]string{p, p + suffix})
	}
	if len(moved) > 0 && moved[0][0] == db {
		opts.CarryAuditFrom = aside
	}
	res, err := Restore(ctx, f, opts)
	if err != nil {
		if rerr := putBack(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err == nil {
		// The fresh appliance's bootstrap token belonged to the store set aside.
		os.Remove(filepath.Join(opts.DataDir, "bootstrap-token"))
	}
	out := map[string]any{"time": time.Now().UTC(), "ok": err == nil}
	if err != nil {
		out["error"] = err.Error()
	} else {
		out["result"] = res
		out["previous_store"] = aside
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	_ = os.WriteFile(filepath.Join(dir, ResultFile), b, 0o600)
	return err == nil, res, err
}
