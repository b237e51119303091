// Package storetest helps tests of other packages use a real store: MustOpen
// opens a fresh store file in the test's temporary directory and closes it
// when the test ends. Imported by tests only; production code must not
// import it.
package storetest

import (
	"path/filepath"
	"testing"
	"time"

	"qubiq.dev/edge/store"
)

// MustOpen opens a new, empty store in t.TempDir() (with a 1 s lock timeout)
// and registers its Close with t.Cleanup; a failure to open or close fails
// the test.
func MustOpen(t testing.TB) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), store.FileName)
	db, err := store.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("storetest: open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("storetest: close %s: %v", path, err)
		}
	})
	return db
}
