package qfw

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Errors a refused bundle wraps (compare with errors.Is); the message names
// the file, key or version concerned.
var (
	ErrFormat     = errors.New("not a valid firmware bundle")
	ErrUnknownKey = errors.New("signed by a key this appliance does not trust")
	ErrSignature  = errors.New("signature does not match the manifest")
	ErrHash       = errors.New("file does not match the manifest")
	ErrDowngrade  = errors.New("older than the running firmware")
	ErrArch       = errors.New("built for another architecture")
	ErrTooLarge   = errors.New("bundle larger than the limit")
	ErrBusy       = errors.New("a flash cannot start now")
)

// Kind names the rule a refused bundle broke, for front doors that map it
// to a status or a problem type: "unknown_key", "signature", "hash",
// "format", "arch", "downgrade", "upgrade_path", "too_large", "busy"; ""
// for other errors (I/O: the appliance's fault, not the bundle's).
func Kind(err error) string {
	for _, k := range []struct {
		err  error
		kind string
	}{{ErrUnknownKey, "unknown_key"}, {ErrSignature, "signature"}, {ErrHash, "hash"}, {ErrFormat, "format"},
		{ErrArch, "arch"}, {ErrDowngrade, "downgrade"}, {ErrUpgradePath, "upgrade_path"}, {ErrTooLarge, "too_large"}, {ErrBusy, "busy"}} {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return ""
}

// EntrySig is the bundle entry holding the manifest's signature (the
// manifest itself is manifest.json, the first entry).
const EntrySig = "manifest.sig"

const (
	entryManifest = "manifest.json"
	slotPrefix    = "slot/"
	sigContext    = "qubiq-fw-v1\n"
)

// signManifest returns the manifest.sig content for raw.
func signManifest(raw []byte, key *SigningKey) []byte {
	sig := ed25519.Sign(key.Key, append([]byte(sigContext), raw...))
	return fmt.Appendf(nil, "ed25519 %s %s\n", key.Name, base64.StdEncoding.EncodeToString(sig))
}

// checkSignature verifies manifest.sig over raw with the trusted key it
// names, and returns that name.
func checkSignature(raw, sigFile []byte, keys TrustedKeys) (string, error) {
	f := strings.Fields(string(sigFile))
	if len(f) != 3 || f[0] != "ed25519" {
		return "", fmt.Errorf("%w: manifest.sig is not \"ed25519 KEY SIGNATURE\"", ErrFormat)
	}
	pub, ok := keys[f[1]]
	if !ok {
		return f[1], fmt.Errorf("%w: key %q is not in the trusted firmware keys", ErrUnknownKey, f[1])
	}
	sig, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return f[1], fmt.Errorf("%w: manifest.sig holds no ed25519 signature", ErrFormat)
	}
	if !ed25519.Verify(pub, append([]byte(sigContext), raw...), sig) {
		return f[1], fmt.Errorf("%w (key %q)", ErrSignature, f[1])
	}
	return f[1], nil
}

// Reader reads a bundle entry by entry (OpenReader, then Each and Drain).
type Reader struct {
	gz    *gzip.Reader
	tr    *tar.Reader
	m     *Manifest
	raw   []byte // manifest.json as signed
	sig   []byte
	key   string // the key that signed it (when checked)
	byPth map[string]*File
}

// OpenReader reads the manifest and its signature from r. With keys it
// verifies the signature before parsing anything else (nil keys: no check,
// for Resign).
func OpenReader(r io.Reader, keys TrustedKeys) (*Reader, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	br := &Reader{gz: gz, tr: tar.NewReader(gz)}
	if br.raw, err = br.small(entryManifest, MaxManifestSize); err != nil {
		return nil, err
	}
	if br.sig, err = br.small(EntrySig, 4096); err != nil {
		return nil, err
	}
	if keys != nil {
		if br.key, err = checkSignature(br.raw, br.sig, keys); err != nil {
			return nil, err
		}
	}
	if br.m, err = ParseManifest(br.raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	br.byPth = make(map[string]*File, len(br.m.Files))
	for i := range br.m.Files {
		br.byPth[br.m.Files[i].Path] = &br.m.Files[i]
	}
	return br, nil
}

// small reads the next entry, which must be the regular file name of at
// most limit bytes.
func (br *Reader) small(name string, limit int64) ([]byte, error) {
	h, err := br.tr.Next()
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrFormat, name, err)
	}
	if h.Name != name || h.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%w: entry %q where %s belongs", ErrFormat, h.Name, name)
	}
	if h.Size > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrFormat, name, h.Size, limit)
	}
	return io.ReadAll(io.LimitReader(br.tr, limit))
}

// Each calls fn for every slot entry, in bundle order, checking it against
// the manifest: a name under slot/ listed in the manifest, once, of the
// listed kind, size and link target. fn reads regular files' content from
// r; whatever it leaves is read here, and the SHA-256 of all of it must
// match, else Each returns ErrHash naming the file (after fn ran: fn must
// write only to places it discards on error). At the end every manifest
// entry must have been seen.
func (br *Reader) Each(fn func(f *File, r io.Reader) error) error {
	seen := make(map[string]bool, len(br.m.Files))
	for {
		h, err := br.tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrFormat, err)
		}
		p, ok := strings.CutPrefix(h.Name, slotPrefix)
		f := br.byPth[strings.TrimSuffix(p, "/")]
		if !ok || f == nil {
			return fmt.Errorf("%w: %q is not in the signed manifest", ErrHash, h.Name)
		}
		if seen[f.Path] {
			return fmt.Errorf("%w: %s appears twice", ErrHash, f.Path)
		}
		seen[f.Path] = true
		switch {
		case f.Dir:
			if h.Typeflag != tar.TypeDir {
				return fmt.Errorf("%w: %s is a directory in the manifest, not in the bundle", ErrHash, f.Path)
			}
			if err := fn(f, nil); err != nil {
				return err
			}
		case f.Link != "":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != f.Link {
				return fmt.Errorf("%w: %s is a link to %q in the manifest", ErrHash, f.Path, f.Link)
			}
			if err := fn(f, nil); err != nil {
				return err
			}
		default:
			if h.Typeflag != tar.TypeReg || h.Size != f.Size {
				return fmt.Errorf("%w: %s: %d bytes in the bundle, %d in the manifest", ErrHash, f.Path, h.Size, f.Size)
			}
			sum := sha256.New()
			tee := io.TeeReader(br.tr, sum)
			if err := fn(f, tee); err != nil {
				return err
			}
			if _, err := io.Copy(io.Discard, tee); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrFormat, f.Path, err)
			}
			if got := hex.EncodeToString(sum.Sum(nil)); got != f.SHA256 {
				return fmt.Errorf("%w: %s has sha256 %s, the manifest says %s", ErrHash, f.Path, got, f.SHA256)
			}
		}
	}
	for _, f := range br.m.Files {
		if !seen[f.Path] {
			return fmt.Errorf("%w: %s is in the manifest but not in the bundle", ErrHash, f.Path)
		}
	}
	return nil
}

// BuildOptions configures Build.
type BuildOptions struct {
	// SlotDir holds the slot's contents (bin/qubiqd, bin/qubiqctl,
	// python/...). A manifest.json or manifest.sig at its top is skipped.
	SlotDir        string
	Version        string
	Arch           string
	MinFromVersion string
	SchemaVersion  uint64
	Key            *SigningKey
	// Created is the manifest's time and every entry's mtime (zero: now),
	// so a rebuild from the same tree with the same time is the same bytes.
	Created time.Time
}

// Build writes a signed bundle of opts.SlotDir to w and returns its
// manifest. Files must not change while it runs (it hashes them, then
// copies them and checks the hash again).
func Build(w io.Writer, opts BuildOptions) (*Manifest, error) {
	if opts.Key == nil {
		return nil, errors.New("firmware: build: no signing key")
	}
	m, raw, err := SlotManifest(opts)
	if err != nil {
		return nil, err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	if err := writeHead(tw, raw, signManifest(raw, opts.Key), m.Created); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		if err := writeEntry(tw, f, filepath.Join(opts.SlotDir, filepath.FromSlash(f.Path)), m.Created); err != nil {
			return nil, fmt.Errorf("firmware: build: %w", err)
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return nil, fmt.Errorf("firmware: build: %w", err)
	}
	return m, nil
}

// SlotManifest computes the manifest of the slot tree opts.SlotDir (Key is
// not used) and returns it with its JSON bytes: what Build signs, and what
// the package installs as slots/a/manifest.json beside the files.
func SlotManifest(opts BuildOptions) (*Manifest, []byte, error) {
	if opts.Created.IsZero() {
		opts.Created = time.Now().UTC().Truncate(time.Second)
	}
	m := &Manifest{Format: Format, Product: Product, Version: opts.Version, Arch: opts.Arch,
		MinFromVersion: opts.MinFromVersion, SchemaVersion: opts.SchemaVersion, Created: opts.Created}
	root := opts.SlotDir
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." || rel == entryManifest || rel == EntrySig {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			m.Files = append(m.Files, File{Path: rel, Dir: true})
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m.Files = append(m.Files, File{Path: rel, Link: t})
		case fi.Mode().IsRegular():
			sum, err := HashFile(p)
			if err != nil {
				return err
			}
			m.Files = append(m.Files, File{Path: rel, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), SHA256: sum})
		default:
			return fmt.Errorf("%s: not a file, directory or link", p)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("firmware: manifest of %s: %w", root, err)
	}
	raw, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, nil, err
	}
	if _, err := ParseManifest(raw); err != nil {
		return nil, nil, fmt.Errorf("firmware: manifest of %s: %w", root, err)
	}
	return m, raw, nil
}

// HashFile returns the hex SHA-256 of the file at p, as a manifest holds it.
func HashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeHead(tw *tar.Writer, raw, sig []byte, t time.Time) error {
	for _, e := range []struct {
		name string
		b    []byte
	}{{entryManifest, raw}, {EntrySig, sig}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.b)), ModTime: t, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(e.b); err != nil {
			return err
		}
	}
	return nil
}

func writeEntry(tw *tar.Writer, f File, src string, t time.Time) error {
	if f.Dir || f.Link != "" {
		return writeEntryFrom(tw, f, nil, t)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	sum := sha256.New()
	if err := writeEntryFrom(tw, f, io.TeeReader(io.LimitReader(in, f.Size), sum), t); err != nil {
		return err
	}
	if hex.EncodeToString(sum.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%s changed while the bundle was built", src)
	}
	return nil
}

// Resign writes to w the bundle read from r with its manifest signed by key
// instead (a release manager signing a build: `qubiqctl firmware sign`).
// The old signature is not checked, every file's hash is. It returns the
// manifest.
func Resign(r io.Reader, w io.Writer, key *SigningKey) (*Manifest, error) {
	br, err := OpenReader(r, nil)
	if err != nil {
		return nil, fmt.Errorf("firmware: sign: %w", err)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	t := br.m.Created
	if err := writeHead(tw, br.raw, signManifest(br.raw, key), t); err != nil {
		return nil, err
	}
	err = br.Each(func(f *File, rd io.Reader) error { return writeEntryFrom(tw, *f, rd, t) })
	if err != nil {
		return nil, fmt.Errorf("firmware: sign: %w", err)
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return nil, fmt.Errorf("firmware: sign: %w", err)
	}
	return br.m, nil
}

func writeEntryFrom(tw *tar.Writer, f File, r io.Reader, t time.Time) error {
	h := &tar.Header{Name: slotPrefix + f.Path, ModTime: t, Format: tar.FormatPAX}
	switch {
	case f.Dir:
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		return tw.WriteHeader(h)
	case f.Link != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		return tw.WriteHeader(h)
	}
	h.Typeflag, h.Size, h.Mode = tar.TypeReg, f.Size, int64(f.Mode)
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, r)
	if err == nil && n != f.Size {
		err = fmt.Errorf("%s: %d bytes, the manifest says %d", f.Path, n, f.Size)
	}
	return err
}

// Inspect reads the manifest of a bundle and checks its signature against
// keys (nil: signature not checked), without reading the files.
func Inspect(r io.Reader, keys TrustedKeys) (*Manifest, string, error) {
	br, err := OpenReader(r, keys)
	if err != nil {
		return nil, "", err
	}
	return br.m, br.key, nil
}

// Verify checks a whole bundle: the signature against keys, then every
// file's hash. It writes nothing.
func Verify(r io.Reader, keys TrustedKeys) (*Manifest, error) {
	br, err := OpenReader(r, keys)
	if err != nil {
		return nil, err
	}
	if err := br.Each(func(*File, io.Reader) error { return nil }); err != nil {
		return nil, err
	}
	return br.m, nil
}

// ManifestBytes is the stored manifest with its signature, as installed in
// the slot for `qubiqctl status` and slots.ReadSlotInfo.
func (br *Reader) ManifestBytes() ([]byte, []byte) { return bytes.Clone(br.raw), bytes.Clone(br.sig) }

// Manifest is the bundle's manifest, as verified by OpenReader.
func (br *Reader) Manifest() *Manifest { return br.m }

// Key is the name of the trusted key that signed the bundle ("" when
// OpenReader was given no keys).
func (br *Reader) Key() string { return br.key }

// Drain reads the rest of the compressed stream (after Each), so the
// gzip trailer's checksum is checked; a damaged stream wraps ErrFormat.
func (br *Reader) Drain() error {
	if _, err := io.Copy(io.Discard, br.gz); err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return nil
}
