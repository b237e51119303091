package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// lockTimeout is the scaled-down open timeout of the file-lock tests (the
// default is 5 s; what matters is "fails after the timeout, never hangs").
const lockTimeout = 200 * time.Millisecond

func assertInUse(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: err = %v, want ErrInUse", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "database is in use by another process") || !strings.Contains(msg, path) {
		t.Fatalf("second open: message %q must say %q and name %s", msg, "database is in use by another process", path)
	}
}

// A second opener of the same file in this process fails with ErrInUse
// after the timeout instead of hanging, where bbolt alone would wait forever
// (bbolt README, "Opening a database"); so does a read-only opener while a
// writer holds the lock. The first DB keeps working.
func TestOpen_SecondOpener_InUse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readOnly bool
	}{
		{"read-write", false},
		{"read-only while writer holds the lock", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			first, err := Open(path, Options{Timeout: lockTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()

			start := time.Now()
			second, err := Open(path, Options{Timeout: lockTimeout, ReadOnly: tc.readOnly})
			elapsed := time.Since(start)
			if err == nil {
				second.Close()
				t.Fatal("second open succeeded; want ErrInUse")
			}
			assertInUse(t, err, path)
			if elapsed < lockTimeout/2 || elapsed > lockTimeout+2*time.Second {
				t.Errorf("second open failed after %s; want about %s", elapsed, lockTimeout)
			}
			if err := first.PutMeta("still", []byte("works")); err != nil {
				t.Errorf("first DB after the refused open: %v", err)
			}
		})
	}
}

// The helper process of the cross-process file-lock tests. It does nothing unless
// started by them with STORE_TEST_HELPER set:
//   - "open": open STORE_TEST_DB with lockTimeout; print "opened" or the
//     error and "elapsed_ms=N" to stderr; exit 0 or 3.
//   - "hold": open STORE_TEST_DB, print "ready" to stdout, hold the lock
//     until stdin closes.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("STORE_TEST_HELPER")
	if mode == "" {
		return
	}
	path := os.Getenv("STORE_TEST_DB")
	switch mode {
	case "open":
		start := time.Now()
		db, err := Open(path, Options{Timeout: lockTimeout})
		fmt.Fprintf(os.Stderr, "elapsed_ms=%d\n", time.Since(start).Milliseconds())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		db.Close()
		fmt.Fprintln(os.Stderr, "opened")
		os.Exit(0)
	case "hold":
		db, err := Open(path, Options{Timeout: lockTimeout})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin) // holds the lock until the parent closes stdin
		db.Close()
		os.Exit(0)
	}
	os.Exit(2)
}

func helperCmd(ctx context.Context, mode, path string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STORE_TEST_HELPER="+mode, "STORE_TEST_DB="+path)
	return cmd
}

// A second daemon process on the same file exits non-zero within the open
// timeout with "database is in use by another process"; the first is
// unaffected.
func TestOpen_SecondProcess_ExitsWithinTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	first, err := Open(path, Options{Timeout: lockTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stderr strings.Builder
	cmd := helperCmd(ctx, "open", path)
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("second process hung on the lock (killed after 20 s); stderr: %s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("second process: err = %v, want exit code 3; stderr: %s", err, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "database is in use by another process") || !strings.Contains(out, path) {
		t.Fatalf("second process stderr %q must say the database is in use and name %s", out, path)
	}
	m := regexp.MustCompile(`elapsed_ms=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no elapsed_ms in %q", out)
	}
	ms, _ := strconv.Atoi(m[1])
	if d := time.Duration(ms) * time.Millisecond; d < lockTimeout/2 || d > lockTimeout+2*time.Second {
		t.Errorf("second process's Open failed after %s; want about %s", d, lockTimeout)
	}
	if err := first.PutMeta("first", []byte("unaffected")); err != nil {
		t.Errorf("first DB after the second process: %v", err)
	}
}

// Reversed roles: while another process holds the file, this process's
// read-write and read-only opens fail with ErrInUse; once it releases the
// lock, Open succeeds.
func TestOpen_OtherProcessHolds_InUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := helperCmd(ctx, "hold", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		_ = cmd.Wait()
		t.Fatalf("holder did not start: %q %v; stderr: %s", line, err, stderr.String())
	}
	for _, ro := range []bool{false, true} {
		db, err := Open(path, Options{Timeout: lockTimeout, ReadOnly: ro})
		if err == nil {
			db.Close()
			t.Fatalf("open (read-only %v) while another process holds the file succeeded", ro)
		}
		assertInUse(t, err, path)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder: %v; stderr: %s", err, stderr.String())
	}
	db, err := Open(path, Options{Timeout: lockTimeout})
	if err != nil {
		t.Fatalf("open after the holder exited: %v", err)
	}
	db.Close()
}

func TestOpen_CreatesDirAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "sub", FileName)
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Dir(path), 0o700},
		{path, 0o600},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, got, tc.mode)
		}
	}
	v, err := db.SchemaVersion()
	if err != nil || v != SchemaVersion {
		t.Errorf("schema version = %d, %v; want %d", v, err, SchemaVersion)
	}
	if DefaultOptions.Timeout != 5*time.Second {
		t.Errorf("DefaultOptions.Timeout = %s, want 5s (docs/config.md store.open_timeout)", DefaultOptions.Timeout)
	}
}

func TestOpen_ReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)

	t.Run("missing file is an error, nothing created", func(t *testing.T) {
		missing := filepath.Join(dir, "absent", FileName)
		if db, err := Open(missing, Options{ReadOnly: true, Timeout: lockTimeout}); err == nil {
			db.Close()
			t.Fatal("read-only open of a missing file succeeded")
		}
		if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
			t.Errorf("read-only open created %s", filepath.Dir(missing))
		}
	})
	t.Run("reads, refuses writes", func(t *testing.T) {
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PutMeta("k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		db.Close()
		ro, err := Open(path, Options{ReadOnly: true, Timeout: lockTimeout})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if v, err := ro.Meta("k"); err != nil || string(v) != "v" {
			t.Errorf("Meta = %q, %v", v, err)
		}
		if err := ro.PutMeta("k", []byte("w")); !errors.Is(err, ErrReadOnly) {
			t.Errorf("PutMeta on read-only = %v, want ErrReadOnly", err)
		}
	})
}

func TestDB_Close_MethodsReturnErrClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := db.Meta("k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Meta after Close = %v, want ErrClosed", err)
	}
	if err := db.PutProject([]byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("PutProject after Close = %v, want ErrClosed", err)
	}
}

// setSchemaVersion writes v as the file's schema version behind the API's
// back, as a newer or older build would have.
func setSchemaVersion(t *testing.T, path string, v uint64) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(keySchemaVersion), u64Key(v))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpen_SchemaNewerThanKnown_Error(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	setSchemaVersion(t, path, SchemaVersion+1)
	for _, ro := range []bool{false, true} {
		db, err := Open(path, Options{ReadOnly: ro, Timeout: lockTimeout})
		if err == nil {
			db.Close()
			t.Fatalf("open (read-only %v) of a newer schema succeeded", ro)
		}
		if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), fmt.Sprintf("version %d", SchemaVersion+1)) {
			t.Errorf("open (read-only %v) = %v; want ErrSchemaTooNew naming the file and version %d", ro, err, SchemaVersion+1)
		}
	}
	// The refused open changed nothing: the file still says the newer version.
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.View(func(tx *bolt.Tx) error {
		v, err := readSchemaVersion(tx)
		if v != SchemaVersion+1 {
			t.Errorf("version after refused open = %d", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpen_ReadOnlyOlderSchema_Error(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	setSchemaVersion(t, path, 0)
	if db, err := Open(path, Options{ReadOnly: true, Timeout: lockTimeout}); err == nil {
		db.Close()
		t.Fatal("read-only open of an unmigrated file succeeded")
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("read-write open migrates: %v", err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(); v != SchemaVersion || err != nil {
		t.Errorf("version after migration = %d, %v", v, err)
	}
}

func TestMigrations_MatchSchemaVersion(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Fatalf("%d migrations, SchemaVersion %d", len(migrations), SchemaVersion)
	}
}

// The migration mechanism: pending migrations run in order, each once, in
// one transaction; a failing one leaves the version and data as they were.
func TestDB_Migrate_InOrderAndAtomic(t *testing.T) {
	db := openTest(t)
	var ran []uint64
	step := func(to uint64, fail bool) migration {
		return migration{to: to, name: fmt.Sprintf("step %d", to), fn: func(tx *bolt.Tx) error {
			ran = append(ran, to)
			if _, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprintf("m%d", to))); err != nil {
				return err
			}
			if fail {
				return errors.New("injected")
			}
			return nil
		}}
	}
	ms := append(append([]migration(nil), migrations...), step(2, false), step(3, false))

	v, err := db.migrate(ms)
	if err != nil || v != 3 || fmt.Sprint(ran) != "[2 3]" {
		t.Fatalf("migrate = %d, %v, ran %v; want 3, nil, [2 3]", v, err, ran)
	}
	ran = nil
	if v, err := db.migrate(ms); err != nil || v != 3 || len(ran) != 0 {
		t.Fatalf("second migrate = %d, %v, ran %v; want nothing run", v, err, ran)
	}

	ran = nil
	bad := append(ms[:3:3], step(4, false), step(5, true))
	if _, err := db.migrate(bad); err == nil || !strings.Contains(err.Error(), "version 5") {
		t.Fatalf("failing migrate = %v; want an error naming version 5", err)
	}
	if v, _ := db.SchemaVersion(); v != 3 {
		t.Errorf("version after failed migration = %d, want 3", v)
	}
	err = db.view(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("m4")) != nil {
			t.Error("migration 4's bucket survived the failed batch")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := db.migrate(ms[:1]); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("migrate with fewer migrations than the file = %v, want ErrSchemaTooNew", err)
	}
}
