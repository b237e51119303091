package store

import (
	"path/filepath"
	"testing"
	"time"
)

// openTest opens a fresh store in t.TempDir() and closes it at the end of
// the test. (Internal tests cannot use storetest: it imports store.)
func openTest(t testing.TB) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}
