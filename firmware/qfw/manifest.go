package qfw

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// ErrUpgradePath is wrapped when the running version is below the bundle's
// min_from_version.
var ErrUpgradePath = errors.New("cannot be flashed over the running version")

// Format is the manifest format this build reads and writes.
const Format = 1

// Product names what a bundle is for; other products' bundles are refused.
const Product = "qubiq-edge"

// Limits on what a manifest may list (a hostile manifest cannot make the
// verifier allocate without bound).
const (
	MaxManifestSize = 8 << 20 // bytes
	MaxFiles        = 100000
	MaxPathLen      = 1024
)

// Manifest is manifest.json: what a bundle installs and where it may go.
type Manifest struct {
	Format  int    `json:"format"`
	Product string `json:"product"`
	// Version is the firmware version (semantic: 1.4.0, 1.5.0-rc.1).
	Version string `json:"version"`
	// Arch is Go's GOARCH of the binaries (amd64, arm64); it must match the
	// appliance, forced or not.
	Arch string `json:"arch"`
	// MinFromVersion is the lowest running version this bundle may be
	// flashed over ("" allows any): migrations older than that are not
	// carried.
	MinFromVersion string `json:"min_from_version,omitempty"`
	// SchemaVersion is the store schema the bundle's daemon writes; qubiq-slot
	// snapshots the store before a schema change (slots.Boot).
	SchemaVersion uint64    `json:"schema_version"`
	Created       time.Time `json:"created"`
	Files         []File    `json:"files"`
}

// File is one entry of the slot: a regular file (Size, Mode, SHA256), a
// directory (Dir) or a symbolic link (Link, relative, staying inside the
// slot).
type File struct {
	Path   string `json:"path"`
	Dir    bool   `json:"dir,omitempty"`
	Link   string `json:"link,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Mode   uint32 `json:"mode,omitempty"` // permission bits (0755, 0644)
	SHA256 string `json:"sha256,omitempty"`
}

// Name is the bundle's file name: qubiq-<version>-<arch>.qfw.
func (m *Manifest) Name() string { return BundleName(m.Version, m.Arch) }

// BundleName is qubiq-<version>-<arch>.qfw.
func BundleName(version, arch string) string { return "qubiq-" + version + "-" + arch + ".qfw" }

// TotalSize is the sum of the regular files' sizes.
func (m *Manifest) TotalSize() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// ParseManifest decodes and checks a manifest: format, product, version,
// arch, and every entry's path (clean, relative, unique, under MaxPathLen),
// link target (relative, inside the slot), mode and hash shape. Unknown
// fields are refused.
func ParseManifest(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	var errs []error
	if m.Format != Format {
		errs = append(errs, fmt.Errorf("manifest format %d, this build reads %d", m.Format, Format))
	}
	if m.Product != Product {
		errs = append(errs, fmt.Errorf("product %q is not %q", m.Product, Product))
	}
	if _, err := parseVersion(m.Version); err != nil {
		errs = append(errs, fmt.Errorf("version: %w", err))
	}
	if m.MinFromVersion != "" {
		if _, err := parseVersion(m.MinFromVersion); err != nil {
			errs = append(errs, fmt.Errorf("min_from_version: %w", err))
		}
	}
	if m.Arch == "" {
		errs = append(errs, errors.New("arch is empty"))
	}
	if len(m.Files) > MaxFiles {
		errs = append(errs, fmt.Errorf("%d files, more than %d", len(m.Files), MaxFiles))
	}
	seen := map[string]bool{}
	hasDaemon := false
	for _, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[f.Path] {
			errs = append(errs, fmt.Errorf("%s listed twice", f.Path))
		}
		seen[f.Path] = true
		switch {
		case f.Dir:
			if f.Link != "" || f.Size != 0 || f.SHA256 != "" {
				errs = append(errs, fmt.Errorf("%s: a directory with file fields", f.Path))
			}
		case f.Link != "":
			if f.Size != 0 || f.SHA256 != "" {
				errs = append(errs, fmt.Errorf("%s: a link with file fields", f.Path))
			}
			if path.IsAbs(f.Link) || !inside(path.Join(path.Dir(f.Path), f.Link)) {
				errs = append(errs, fmt.Errorf("%s: link %q leaves the slot", f.Path, f.Link))
			}
		default:
			if len(f.SHA256) != 64 || strings.Trim(f.SHA256, "0123456789abcdef") != "" {
				errs = append(errs, fmt.Errorf("%s: sha256 %q is not 64 lower-case hex digits", f.Path, f.SHA256))
			}
			if f.Size < 0 || f.Mode&^0o777 != 0 {
				errs = append(errs, fmt.Errorf("%s: bad size or mode", f.Path))
			}
			if f.Path == "bin/qubiqd" && f.Mode&0o111 != 0 {
				hasDaemon = true
			}
		}
	}
	if !hasDaemon {
		errs = append(errs, errors.New("no executable bin/qubiqd: the slot would not boot"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	return &m, nil
}

func checkPath(p string) error {
	if p == "" || len(p) > MaxPathLen || path.IsAbs(p) || path.Clean(p) != p || !inside(p) || strings.ContainsAny(p, "\x00\\") {
		return fmt.Errorf("path %q is not a clean relative path inside the slot", p)
	}
	if p == "manifest.json" || p == "manifest.sig" {
		return fmt.Errorf("path %q is reserved", p)
	}
	return nil
}

func inside(p string) bool {
	c := path.Clean(p)
	return c != ".." && !strings.HasPrefix(c, "../") && c != "."
}

// version is a parsed semantic version: numeric core, pre-release parts.
type version struct {
	core []int
	pre  []string
}

func parseVersion(s string) (version, error) {
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "+")
	core, pre, hasPre := strings.Cut(s, "-")
	var v version
	if core == "" {
		return v, fmt.Errorf("%q is not a version (want 1.2.3 or 1.2.3-rc.1)", s)
	}
	for _, p := range strings.Split(core, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("%q is not a version (want 1.2.3 or 1.2.3-rc.1)", s)
		}
		v.core = append(v.core, n)
	}
	if hasPre {
		if pre == "" {
			return v, fmt.Errorf("%q has an empty pre-release", s)
		}
		v.pre = strings.Split(pre, ".")
	}
	return v, nil
}

// CompareVersions orders two versions the semantic-versioning way (numeric
// core parts, a missing part is 0; a pre-release sorts before its release;
// pre-release parts compare numerically when both are numbers): -1, 0 or
// +1. A version that does not parse is an error.
func CompareVersions(a, b string) (int, error) {
	va, err := parseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := parseVersion(b)
	if err != nil {
		return 0, err
	}
	for i := 0; i < max(len(va.core), len(vb.core)); i++ {
		x, y := at(va.core, i), at(vb.core, i)
		if x != y {
			return sign(x - y), nil
		}
	}
	switch {
	case len(va.pre) == 0 && len(vb.pre) == 0:
		return 0, nil
	case len(va.pre) == 0:
		return 1, nil
	case len(vb.pre) == 0:
		return -1, nil
	}
	for i := 0; i < min(len(va.pre), len(vb.pre)); i++ {
		x, y := va.pre[i], vb.pre[i]
		nx, ex := strconv.Atoi(x)
		ny, ey := strconv.Atoi(y)
		switch {
		case ex == nil && ey == nil && nx != ny:
			return sign(nx - ny), nil
		case x != y:
			return strings.Compare(x, y), nil
		}
	}
	return sign(len(va.pre) - len(vb.pre)), nil
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// ValidVersion reports whether s is a release version bundles compare
// with (CompareVersions); a development build's version is not.
func ValidVersion(s string) error {
	_, err := parseVersion(s)
	return err
}
