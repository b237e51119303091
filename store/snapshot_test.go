package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSnapshot_CopyOpensAsTheSameStore(t *testing.T) {
	db := openTest(t)
	if err := db.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := db.Snapshot(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("snapshot: n=%d len=%d err=%v", n, buf.Len(), err)
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := FileSchemaVersion(path, time.Second)
	if err != nil || v != SchemaVersion {
		t.Fatalf("FileSchemaVersion = %d, %v", v, err)
	}
	cp, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	if got, _ := cp.Meta("k"); string(got) != "v" {
		t.Fatalf("meta in the copy: %q", got)
	}
}

func TestCopyFile_AndSchemaOfMissingOrLockedFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, FileName)
	db, err := Open(src, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// Held open read-write: the read-only open waits for the lock and fails.
	if _, err := FileSchemaVersion(src, 100*time.Millisecond); !errors.Is(err, ErrInUse) {
		t.Fatalf("locked file: %v, want ErrInUse", err)
	}
	db.Close()
	dst := filepath.Join(dir, "copy.db")
	v, err := CopyFile(src, dst, time.Second)
	if err != nil || v != SchemaVersion {
		t.Fatalf("CopyFile = %d, %v", v, err)
	}
	if _, err := CopyFile(src, dst, time.Second); err == nil {
		t.Fatal("CopyFile over an existing file succeeded")
	}
	if _, err := FileSchemaVersion(filepath.Join(dir, "none.db"), time.Second); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestDropCredentials_KeepsUsersAndOtherMeta(t *testing.T) {
	db := openTest(t)
	if err := db.PutAPIKey(APIKey{ID: "k1", Name: "ci", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutSession(Session{ID: "s1", User: "admin", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	db.PutMeta("bootstrap_token_hash", []byte("h"))
	db.PutMeta("other", []byte("o"))
	keys, sess, err := db.DropCredentials("bootstrap_token_hash")
	if err != nil || keys != 1 || sess != 1 {
		t.Fatalf("DropCredentials = %d, %d, %v", keys, sess, err)
	}
	if ks, _ := db.APIKeys(); len(ks) != 0 {
		t.Fatalf("api keys left: %v", ks)
	}
	if ss, _ := db.Sessions(); len(ss) != 0 {
		t.Fatalf("sessions left: %v", ss)
	}
	if h, _ := db.Meta("bootstrap_token_hash"); h != nil {
		t.Fatalf("bootstrap hash left: %q", h)
	}
	if o, _ := db.Meta("other"); string(o) != "o" {
		t.Fatalf("other meta: %q", o)
	}
}
