// Package files is system.files of QUBIQ Edge (docs/scripting.md, "Python side"
// and "Data directory"): reading and writing files inside one root, the
// data dir's files/ directory, and nowhere else.
//
// Confinement is os.Root's: every name is resolved inside the root by the
// kernel-level walk of os.Root, so neither "..", an absolute path, nor a
// symbolic link (placed by anyone) can reach outside it. Names are checked
// before that too: relative, slash-separated, no empty, "." or ".."
// segments, no control characters. Saves are atomic: the data goes to a
// temporary file in the same directory, is fsync'd, then renamed over the
// target, and the directory is fsync'd.
//
// Who may import it: daemon. files imports no other package of the
// project.
package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"syscall"
)

// Sentinel errors; the errors returned wrap them with the path.
var (
	// ErrInvalidPath is wrapped when a name is not a plain relative path
	// inside the root: absolute, with "..", ".", empty segments or control
	// characters, or leading outside through a symbolic link. Such a call
	// is refused, never adjusted.
	ErrInvalidPath = errors.New("path outside the files root or malformed")
	// ErrNotFound is wrapped when the file does not exist.
	ErrNotFound = errors.New("no such file")
	// ErrTooLarge is wrapped when a file, read or chunk is over its limit
	// (Limits).
	ErrTooLarge = errors.New("over the size limit")
	// ErrIsDir is wrapped when the name is a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrBadRange is wrapped by ReadChunk for a negative offset or length.
	ErrBadRange = errors.New("invalid offset or length")
)

// Limits are the size limits of system.files, in bytes.
type Limits struct {
	// MaxFileBytes caps a saved file.
	MaxFileBytes int64
	// MaxReadBytes caps files.read; larger files are read with readChunk.
	MaxReadBytes int64
	// MaxChunkBytes caps one readChunk.
	MaxChunkBytes int64
}

// DefaultLimits: files up to 64 MiB, read whole up to 8 MiB, chunks up to
// 4 MiB (a script's call and answer travel in frames of at most 16 MiB,
// sandbox/rpc, and bytes travel base64-encoded).
var DefaultLimits = Limits{MaxFileBytes: 64 << 20, MaxReadBytes: 8 << 20, MaxChunkBytes: 4 << 20}

// MaxPath is the longest name accepted, in bytes.
const MaxPath = 1024

// tmpPrefix begins the name of a save's temporary file; user names may not
// begin with it.
const tmpPrefix = ".~qubiq-save-"

// FS is the files root. Its methods are safe for concurrent use.
type FS struct {
	root *os.Root
	lim  Limits
}

// Open opens (creating it with mode 0700 when missing) the directory dir as
// the files root. Zero limits take DefaultLimits.
func Open(dir string, lim Limits) (*FS, error) {
	if lim.MaxFileBytes <= 0 {
		lim.MaxFileBytes = DefaultLimits.MaxFileBytes
	}
	if lim.MaxReadBytes <= 0 {
		lim.MaxReadBytes = DefaultLimits.MaxReadBytes
	}
	if lim.MaxChunkBytes <= 0 {
		lim.MaxChunkBytes = DefaultLimits.MaxChunkBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("files: root %s: %w", dir, err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("files: root %s: %w", dir, err)
	}
	return &FS{root: r, lim: lim}, nil
}

// Close releases the root.
func (f *FS) Close() error { return f.root.Close() }

// Dir returns the root directory's name.
func (f *FS) Dir() string { return f.root.Name() }

// Limits returns the limits in force.
func (f *FS) Limits() Limits { return f.lim }

// CleanPath checks name as a files path and returns it unchanged, or an
// error wrapping ErrInvalidPath that says what is wrong.
func CleanPath(name string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("files: path %q: %s: %w", name, why, ErrInvalidPath)
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxPath:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPath))
	case strings.HasPrefix(name, "/"):
		return bad("absolute paths are refused; name a path inside the files root")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return bad("control character")
		}
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch {
		case seg == "":
			return bad("empty segment")
		case seg == "..":
			return bad(`".." is refused`)
		case seg == ".":
			return bad(`"." segment`)
		case strings.HasPrefix(seg, tmpPrefix):
			return bad("reserved name")
		}
	}
	return name, nil
}

// wrap maps an os.Root error onto the package's sentinels.
func wrap(op, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("files: %s %q: %w", op, name, ErrNotFound)
	case escapes(err):
		return fmt.Errorf("files: %s %q: leads outside the files root (symbolic link?): %w", op, name, ErrInvalidPath)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("files: %s %q: %w", op, name, ErrIsDir)
	}
	return fmt.Errorf("files: %s %q: %w", op, name, err)
}

// escapes reports whether err is os.Root's refusal of a name leading
// outside the root. os.Root has no exported sentinel for it; its message
// is "path escapes from parent" (Go 1.24+).
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "escapes from parent")
}

// stat returns a regular file's info; a directory wraps ErrIsDir.
func (f *FS) stat(op, name string) (fs.FileInfo, error) {
	if _, err := CleanPath(name); err != nil {
		return nil, err
	}
	fi, err := f.root.Stat(name)
	if err != nil {
		return nil, wrap(op, name, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("files: %s %q: %w", op, name, ErrIsDir)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("files: %s %q: not a regular file: %w", op, name, ErrInvalidPath)
	}
	return fi, nil
}

// Size returns the size of the file in bytes.
func (f *FS) Size(name string) (int64, error) {
	fi, err := f.stat("size", name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Read returns the whole file. A file over MaxReadBytes wraps ErrTooLarge
// (read it with ReadChunk).
func (f *FS) Read(name string) ([]byte, error) {
	fi, err := f.stat("read", name)
	if err != nil {
		return nil, err
	}
	if fi.Size() > f.lim.MaxReadBytes {
		return nil, fmt.Errorf("files: read %q: %d bytes is over the %d-byte read limit; use readChunk: %w",
			name, fi.Size(), f.lim.MaxReadBytes, ErrTooLarge)
	}
	fh, err := f.root.Open(name)
	if err != nil {
		return nil, wrap("read", name, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, f.lim.MaxReadBytes+1))
	if err != nil {
		return nil, wrap("read", name, err)
	}
	if int64(len(b)) > f.lim.MaxReadBytes {
		return nil, fmt.Errorf("files: read %q: grew over the %d-byte read limit: %w", name, f.lim.MaxReadBytes, ErrTooLarge)
	}
	return b, nil
}

// ReadChunk returns up to length bytes from offset; fewer at the end of the
// file, none at or past it. A negative offset or length is invalid; a
// length over MaxChunkBytes wraps ErrTooLarge.
func (f *FS) ReadChunk(name string, offset, length int64) ([]byte, error) {
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("files: readChunk %q: offset %d and length %d must not be negative: %w", name, offset, length, ErrBadRange)
	}
	if length > f.lim.MaxChunkBytes {
		return nil, fmt.Errorf("files: readChunk %q: length %d is over the %d-byte chunk limit: %w", name, length, f.lim.MaxChunkBytes, ErrTooLarge)
	}
	if _, err := f.stat("readChunk", name); err != nil {
		return nil, err
	}
	fh, err := f.root.Open(name)
	if err != nil {
		return nil, wrap("readChunk", name, err)
	}
	defer fh.Close()
	buf := make([]byte, length)
	n, err := fh.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, wrap("readChunk", name, err)
	}
	return buf[:n], nil
}

// Save writes data as the file's whole content, atomically: readers see
// the old content or the new, never a mix, and after a crash one of the
// two. Parent directories are created (mode 0700). Data over MaxFileBytes
// wraps ErrTooLarge and nothing is written.
func (f *FS) Save(name string, data []byte) error {
	if _, err := CleanPath(name); err != nil {
		return err
	}
	if int64(len(data)) > f.lim.MaxFileBytes {
		return fmt.Errorf("files: save %q: %d bytes is over the %d-byte file limit: %w", name, len(data), f.lim.MaxFileBytes, ErrTooLarge)
	}
	dir := path.Dir(name)
	if dir != "." {
		if err := f.root.MkdirAll(dir, 0o700); err != nil {
			return wrap("save", name, err)
		}
	}
	if fi, err := f.root.Lstat(name); err == nil && fi.IsDir() {
		return fmt.Errorf("files: save %q: %w", name, ErrIsDir)
	}
	tmp := path.Join(dir, fmt.Sprintf("%s%016x", tmpPrefix, rand.Uint64()))
	fh, err := f.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return wrap("save", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			fh.Close()
			f.root.Remove(tmp) // best effort: the save already failed
		}
	}()
	if _, err := fh.Write(data); err != nil {
		return wrap("save", name, err)
	}
	if err := fh.Sync(); err != nil {
		return wrap("save", name, err)
	}
	if err := fh.Close(); err != nil {
		return wrap("save", name, err)
	}
	if err := f.root.Rename(tmp, name); err != nil {
		return wrap("save", name, err)
	}
	ok = true
	return f.syncDir(dir, name)
}

// syncDir fsyncs the directory holding a renamed file, so the rename
// survives a power loss.
func (f *FS) syncDir(dir, name string) error {
	d, err := f.root.Open(dir)
	if err != nil {
		return wrap("save", name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return wrap("save", name, err)
	}
	return nil
}

// Delete removes the file. A missing file wraps ErrNotFound; a directory
// wraps ErrIsDir.
func (f *FS) Delete(name string) error {
	if _, err := CleanPath(name); err != nil {
		return err
	}
	fi, err := f.root.Lstat(name)
	if err != nil {
		return wrap("delete", name, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("files: delete %q: %w", name, ErrIsDir)
	}
	if err := f.root.Remove(name); err != nil {
		return wrap("delete", name, err)
	}
	return f.syncDir(path.Dir(name), name)
}
