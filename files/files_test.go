package files

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func newFS(t *testing.T, lim Limits) (*FS, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "files")
	f, err := Open(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, base
}

func TestFS_SaveReadSizeChunkDelete_RoundTrip(t *testing.T) {
	f, _ := newFS(t, Limits{})
	data := []byte("hello, files")
	if err := f.Save("reports/2025/a.txt", data); err != nil {
		t.Fatal(err)
	}
	got, err := f.Read("reports/2025/a.txt")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if n, err := f.Size("reports/2025/a.txt"); n != int64(len(data)) || err != nil {
		t.Fatalf("Size = %d, %v", n, err)
	}
	chunks := []struct {
		off, n int64
		want   string
	}{{0, 5, "hello"}, {7, 100, "files"}, {12, 4, ""}, {100, 4, ""}}
	for _, c := range chunks {
		got, err := f.ReadChunk("reports/2025/a.txt", c.off, c.n)
		if err != nil || string(got) != c.want {
			t.Fatalf("ReadChunk(%d, %d) = %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	if err := f.Save("reports/2025/a.txt", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Read("reports/2025/a.txt"); string(got) != "v2" {
		t.Fatalf("after overwrite %q", got)
	}
	ents, _ := os.ReadDir(filepath.Join(f.Dir(), "reports/2025"))
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries (a temporary file left?)", len(ents))
	}
	if err := f.Delete("reports/2025/a.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read("reports/2025/a.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read after Delete = %v; want ErrNotFound", err)
	}
	if err := f.Delete("reports/2025/a.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete = %v; want ErrNotFound", err)
	}
	if err := f.Delete("reports"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("Delete(dir) = %v; want ErrIsDir", err)
	}
	if _, err := f.Read("reports"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("Read(dir) = %v; want ErrIsDir", err)
	}
}

// TestFS_Paths_TraversalRefused: no "..", no absolute path, nothing outside
// the root, whatever the spelling.
func TestFS_Paths_TraversalRefused(t *testing.T) {
	f, base := newFS(t, Limits{})
	secret := filepath.Join(base, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"../secret.txt", "a/../../secret.txt", "a/../b", "/etc/passwd", secret, "", ".", "./a", "a//b", "a/",
		"a\x00b", "a\nb", strings.Repeat("x", MaxPath+1), ".~qubiq-save-0000",
	} {
		t.Run(p, func(t *testing.T) {
			if _, err := f.Read(p); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Read(%q) = %v; want ErrInvalidPath", p, err)
			}
			if err := f.Save(p, []byte("x")); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Save(%q) = %v; want ErrInvalidPath", p, err)
			}
			if err := f.Delete(p); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Delete(%q) = %v; want ErrInvalidPath", p, err)
			}
			if _, err := f.Size(p); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Size(%q) = %v; want ErrInvalidPath", p, err)
			}
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Fatalf("the file outside the root changed: %q", b)
	}
}

// TestFS_Symlinks_EscapeRefused: a symbolic link inside the root that
// points outside (file or directory) is refused for every operation that
// follows it; one that points inside works.
func TestFS_Symlinks_EscapeRefused(t *testing.T) {
	f, base := newFS(t, Limits{})
	outDir := filepath.Join(base, "outside")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outDir, "x.txt"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := f.Dir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outDir, "x.txt"), filepath.Join(root, "abs-link")))
	must(os.Symlink("../outside/x.txt", filepath.Join(root, "rel-link")))
	must(os.Symlink(outDir, filepath.Join(root, "dir-link")))
	must(f.Save("in.txt", []byte("inside")))
	must(os.Symlink("in.txt", filepath.Join(root, "good-link")))
	for _, p := range []string{"abs-link", "rel-link", "dir-link/x.txt"} {
		t.Run(p, func(t *testing.T) {
			if b, err := f.Read(p); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Read(%q) = %q, %v; want ErrInvalidPath", p, b, err)
			}
			if _, err := f.ReadChunk(p, 0, 3); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("ReadChunk(%q) = %v; want ErrInvalidPath", p, err)
			}
			if _, err := f.Size(p); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Size(%q) = %v; want ErrInvalidPath", p, err)
			}
		})
	}
	if err := f.Save("dir-link/new.txt", []byte("x")); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Save through a directory link = %v; want ErrInvalidPath", err)
	}
	if _, err := os.Stat(filepath.Join(outDir, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("a file was created outside the root")
	}
	if b, err := f.Read("good-link"); err != nil || string(b) != "inside" {
		t.Fatalf("Read(good-link) = %q, %v", b, err)
	}
	// Saving over a link to outside replaces the link, never the target.
	must(f.Save("abs-link", []byte("replaced")))
	if b, _ := os.ReadFile(filepath.Join(outDir, "x.txt")); string(b) != "outside" {
		t.Fatalf("the link target outside changed: %q", b)
	}
}

func TestFS_Limits(t *testing.T) {
	f, _ := newFS(t, Limits{MaxFileBytes: 10, MaxReadBytes: 5, MaxChunkBytes: 3})
	if err := f.Save("big", make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Save(11 bytes) = %v; want ErrTooLarge", err)
	}
	if _, err := f.Size("big"); !errors.Is(err, ErrNotFound) {
		t.Fatal("a refused save left a file")
	}
	if err := f.Save("ten", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read("ten"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read(10 bytes, limit 5) = %v; want ErrTooLarge", err)
	}
	if _, err := f.ReadChunk("ten", 0, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadChunk(4, limit 3) = %v; want ErrTooLarge", err)
	}
	if _, err := f.ReadChunk("ten", -1, 2); !errors.Is(err, ErrBadRange) {
		t.Fatalf("ReadChunk(-1) = %v; want ErrBadRange", err)
	}
	if b, err := f.ReadChunk("ten", 8, 3); err != nil || string(b) != "89" {
		t.Fatalf("ReadChunk(8, 3) = %q, %v", b, err)
	}
}

// TestFS_Save_AtomicUnderConcurrentReaders: a reader never sees a mix of
// two saves.
func TestFS_Save_AtomicUnderConcurrentReaders(t *testing.T) {
	f, _ := newFS(t, Limits{})
	a, b := bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 64<<10)
	if err := f.Save("x", a); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			if err := f.Save("x", [][]byte{a, b}[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
		close(stop)
	}()
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		default:
		}
		got, err := f.Read("x")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("read a mix of %d bytes", len(got))
		}
	}
}
