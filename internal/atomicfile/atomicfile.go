// Package atomicfile writes a file so that a reader, or the next start after
// a power loss, sees the old content or the new, never a part: the one
// atomic file write of the project (the project file, OPC UA certificate
// stores, the SQL secrets key, the debug change probe). Standard library
// only; any package may import it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes b to path atomically with permissions perm: through a
// temporary file in the same directory (created 0600, so key material is
// never readable by others, then set to perm), synced, renamed over path,
// and the directory synced so the rename survives a power loss. The
// directory must exist. On error path is unchanged and the temporary file
// is removed.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return nil // renamed; a directory we cannot open we cannot sync either
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return d.Close()
}
