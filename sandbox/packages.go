package sandbox

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors of the package operations (DESIGN.md, "Python side": packages).
// Each is wrapped with the subject.
var (
	// ErrPackagesBusy: another install or removal is running; retry when
	// it has ended.
	ErrPackagesBusy = errors.New("another package operation is running")
	// ErrOffline: an install from the index was asked but python.index_url
	// is empty; upload wheel files instead.
	ErrOffline = errors.New("no package index is configured (python.index_url is empty): upload wheel files instead")
	// ErrBadRequirement: the requirement is not "name", "name==1.2" or
	// another version specifier (no URLs, paths, options or markers).
	ErrBadRequirement = errors.New("invalid requirement")
	// ErrBadWheel: an uploaded file is not a wheel (its name does not
	// parse, it is too large, or it is not an intact wheel archive).
	ErrBadWheel = errors.New("invalid wheel file")
	// ErrNotInstalled: the package named for removal is not installed.
	ErrNotInstalled = errors.New("package not installed")
	// ErrIsDependency: the package named for removal was not requested by
	// an administrator but pulled in by one that was; remove that one.
	ErrIsDependency = errors.New("package is a dependency of a requested package")
	// ErrPip: pip failed (the index is unreachable, a wheel is missing, a
	// package does not fit this runtime); the text has pip's reason.
	ErrPip = errors.New("pip failed")
	// ErrNoPip: the runtime has no pip (python -m pip does not run).
	ErrNoPip = errors.New("the Python runtime has no pip")
)

// WideningError refuses an install that was not acknowledged: every
// installed package widens what scripts can do (DESIGN.md, "Python side";
// SANDBOX.md §4.4). Widenings names each package the install would bring,
// its dependencies included, and what it widens. The caller repeats the
// request with acknowledge_widening.
type WideningError struct {
	Widenings []Widening
}

// Error names the packages and what they widen.
func (e *WideningError) Error() string {
	var parts []string
	for _, w := range e.Widenings {
		parts = append(parts, w.Package+": "+strings.Join(w.Widens, "; "))
	}
	return "installing widens the script sandbox, acknowledge it to proceed (acknowledge_widening): " +
		strings.Join(parts, " | ")
}

// Widening is what one package brings to scripts. Package is the
// distribution name, Version its version when known, Requested whether an
// administrator asked for it (else it comes as a dependency), Imports its
// top-level import names when known (they join the allow-list), Widens the
// sentences of the warning table (always at least the generic one).
type Widening struct {
	Package   string   `json:"package"`
	Version   string   `json:"version,omitempty"`
	Requested bool     `json:"requested"`
	Imports   []string `json:"imports,omitempty"`
	Widens    []string `json:"widens"`
}

// Package is one installed distribution (GET /sandbox/packages).
// Imports are its top-level import names, on the allow-list; Requested is
// true for the packages an administrator installed (Requirement, Source
// "index" or "upload", InstalledBy, InstalledAt say how), false for their
// dependencies; Native is true for a package with compiled code, which the
// audit hook cannot see into.
type Package struct {
	Name        string    `json:"name"`
	Version     string    `json:"version"`
	Imports     []string  `json:"imports"`
	Requested   bool      `json:"requested"`
	Requirement string    `json:"requirement,omitempty"`
	Source      string    `json:"source,omitempty"`
	InstalledBy string    `json:"installed_by,omitempty"`
	InstalledAt time.Time `json:"installed_at,omitzero"`
	Native      bool      `json:"native"`
	Widens      []string  `json:"widens"`
}

// Progress is one step of an install or removal, streamed to the caller
// (NDJSON on the API): Step is "resolve", "download", "install", "swap",
// "restart" or "pip" (a line of pip's output in Message).
type Progress struct {
	Step    string `json:"step"`
	Message string `json:"message"`
}

// PackageChange is the result of an install or removal: what was asked
// (Action "install" or "remove", Packages), the packages installed now,
// the import names scripts may use now (Allowed: the built-in allow-list
// and every installed package's imports), what the new packages widen, and
// how long it took.
type PackageChange struct {
	Action     string     `json:"action"`
	Packages   []string   `json:"packages"`
	Installed  []Package  `json:"installed"`
	Allowed    []string   `json:"allowed"`
	Widenings  []Widening `json:"widenings,omitempty"`
	DurationMs int64      `json:"duration_ms"`
}

// PackageRequest asks for an install: either Requirement ("name==1.2",
// from python.index_url) or Upload (wheel files, installed with
// --no-index). Acknowledge must be true (acknowledge_widening) or the
// install is refused with a *WideningError. By names who asked (the
// manifest keeps it; the caller audits).
type PackageRequest struct {
	Requirement string
	Upload      *Upload
	Acknowledge bool
	By          string
}

// manifestEntry is one administrator-requested package: the installs are
// always the whole manifest into a fresh directory (SANDBOX.md §4.1).
type manifestEntry struct {
	Name        string    `json:"name"`        // normalized distribution name
	Requirement string    `json:"requirement"` // as asked
	Pinned      string    `json:"pinned"`      // name==version installed
	Source      string    `json:"source"`      // index | upload
	By          string    `json:"by"`
	At          time.Time `json:"at"`
}

type manifest struct {
	Packages []manifestEntry `json:"packages"`
}

// Package directory layout under the data dir: python-packages is a
// symlink to the current generation; generations, the wheelhouse (every
// wheel installed, so any generation can be rebuilt offline), the manifest
// and staging directories live in python-packages.d.
const (
	pkgDirName    = "python-packages.d"
	wheelhouseDir = "wheelhouse"
	manifestFile  = "manifest.json"
	genPrefix     = "gen-"
	stagePrefix   = "staging-"
)

// Bounds of the package operations.
const (
	pipTimeout       = 10 * time.Minute
	restartTimeout   = 60 * time.Second
	maxWheelBytes    = 256 << 20
	maxWheelUnpacked = 1 << 30
)

func (p *Pool) pkgRoot() string    { return filepath.Join(p.cfg.DataDir, pkgDirName) }
func (p *Pool) wheelhouse() string { return filepath.Join(p.pkgRoot(), wheelhouseDir) }

// randName returns prefix + 16 random hex digits.
func randName(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("sandbox: crypto/rand failed: " + err.Error())
	}
	return prefix + strconv.FormatInt(time.Now().Unix(), 10) + "-" + hex.EncodeToString(b[:])
}

// initPackages makes <data>/python-packages a symlink to a generation
// (adopting a plain directory found there as the first one), removes
// staging directories and old generations left by a crash, and reads the
// installed import names.
func (p *Pool) initPackages() error {
	root := p.pkgRoot()
	if err := os.MkdirAll(filepath.Join(root, wheelhouseDir), 0o755); err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	fi, err := os.Lstat(p.packages)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		if _, err := os.Stat(p.packages); err != nil { // dangling
			if err := p.newEmptyGeneration(); err != nil {
				return err
			}
		}
	case err == nil && fi.IsDir():
		gen := filepath.Join(root, randName(genPrefix))
		if err := os.Rename(p.packages, gen); err != nil {
			return fmt.Errorf("sandbox: packages: adopt %s: %w", p.packages, err)
		}
		if err := p.link(gen); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		if err := p.newEmptyGeneration(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("sandbox: packages: %w", err)
	default:
		return fmt.Errorf("sandbox: packages: %s is neither a directory nor a symlink", p.packages)
	}
	gen, err := filepath.EvalSymlinks(p.packages)
	if err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	p.setGeneration(gen)
	p.cleanGenerations(gen)
	return nil
}

func (p *Pool) newEmptyGeneration() error {
	gen := filepath.Join(p.pkgRoot(), randName(genPrefix))
	if err := os.Mkdir(gen, 0o755); err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	return p.link(gen)
}

// link points <data>/python-packages at gen atomically: a new symlink
// renamed over the old one (rename(2) replaces it in one step).
func (p *Pool) link(gen string) error {
	rel, err := filepath.Rel(filepath.Dir(p.packages), gen)
	if err != nil {
		rel = gen
	}
	tmp := p.packages + "." + randName("tmp-")
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	if err := os.Rename(tmp, p.packages); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sandbox: packages: switch to %s: %w", gen, err)
	}
	return nil
}

// setGeneration makes gen the packages of workers started from now on.
func (p *Pool) setGeneration(gen string) {
	dists := readDists(gen)
	var roots []string
	seen := map[string]bool{}
	for _, d := range dists {
		for _, r := range d.imports {
			if !seen[r] {
				seen[r] = true
				roots = append(roots, r)
			}
		}
	}
	sort.Strings(roots)
	p.mu.Lock()
	p.pkgGen = gen
	p.installed = roots
	p.mu.Unlock()
}

// cleanGenerations removes every generation but keep and every staging
// directory.
func (p *Pool) cleanGenerations(keep ...string) {
	entries, err := os.ReadDir(p.pkgRoot())
	if err != nil {
		return
	}
	for _, e := range entries {
		full := filepath.Join(p.pkgRoot(), e.Name())
		if !strings.HasPrefix(e.Name(), genPrefix) && !strings.HasPrefix(e.Name(), stagePrefix) {
			continue
		}
		skip := false
		for _, k := range keep {
			if full == k {
				skip = true
			}
		}
		if !skip {
			if err := os.RemoveAll(full); err != nil {
				p.logger.Warn("sandbox: old packages directory not removed", "dir", full, "err", err)
			}
		}
	}
}

// dist is one installed distribution as read from its .dist-info.
type dist struct {
	name, version string
	imports       []string
	native        bool
}

// readDists reads every *.dist-info of a generation.
func readDists(gen string) []dist {
	entries, err := os.ReadDir(gen)
	if err != nil {
		return nil
	}
	var out []dist
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".dist-info") {
			continue
		}
		dir := filepath.Join(gen, e.Name())
		d := dist{}
		if b, err := os.ReadFile(filepath.Join(dir, "METADATA")); err == nil {
			d.name, d.version = metadataNameVersion(b)
		}
		if d.name == "" {
			base := strings.TrimSuffix(e.Name(), ".dist-info")
			n, v, _ := strings.Cut(base, "-")
			d.name, d.version = n, v
		}
		d.imports = distImports(dir)
		if b, err := os.ReadFile(filepath.Join(dir, "WHEEL")); err == nil {
			d.native = bytes.Contains(bytes.ToLower(b), []byte("root-is-purelib: false"))
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return normName(out[i].name) < normName(out[j].name) })
	return out
}

// metadataNameVersion reads Name and Version from a METADATA file's
// headers.
func metadataNameVersion(b []byte) (name, version string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Name:"); ok {
			name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Version:"); ok {
			version = strings.TrimSpace(v)
		}
	}
	return name, version
}

// distImports returns a distribution's top-level import names: the lines
// of top_level.txt, else the first path component of each file in RECORD
// (a .py module or a package directory; a compiled module's name before
// its first dot). Names that are not identifiers or begin with "_" (which
// scripts cannot import) are left out.
func distImports(distInfo string) []string {
	seen := map[string]bool{}
	add := func(n string) {
		n = strings.TrimSpace(n)
		if n == "" || strings.HasPrefix(n, "_") || !isIdentifier(n) || n == "bin" {
			return
		}
		seen[n] = true
	}
	if b, err := os.ReadFile(filepath.Join(distInfo, "top_level.txt")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			first, _, _ := strings.Cut(strings.TrimSpace(l), "/")
			add(first)
		}
	} else if b, err := os.ReadFile(filepath.Join(distInfo, "RECORD")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			path, _, _ := strings.Cut(l, ",")
			path = strings.Trim(path, `"`)
			first, rest, isDir := strings.Cut(path, "/")
			switch {
			case first == "" || first == ".." || strings.HasSuffix(first, ".dist-info") ||
				strings.HasSuffix(first, ".data") || first == "__pycache__":
			case isDir && rest != "":
				add(first)
			case strings.HasSuffix(first, ".py"):
				add(strings.TrimSuffix(first, ".py"))
			case strings.HasSuffix(first, ".so") || strings.HasSuffix(first, ".pyd"):
				n, _, _ := strings.Cut(first, ".")
				add(n)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func isIdentifier(s string) bool {
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

var nameSepRe = regexp.MustCompile(`[-_.]+`)

// normName is the PEP 503 normalized form of a distribution name.
func normName(n string) string { return nameSepRe.ReplaceAllString(strings.ToLower(n), "-") }

// requirementRe is the accepted subset of PEP 508: a name, optional
// extras and optional version specifiers; no URL, path, option or marker.
var requirementRe = regexp.MustCompile(`^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*` +
	`(\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*` +
	`((?:===|==|!=|<=|>=|~=|<|>)\s*[A-Za-z0-9.*+!_-]+(?:\s*,\s*(?:===|==|!=|<=|>=|~=|<|>)\s*[A-Za-z0-9.*+!_-]+)*)?$`)

// ParseRequirement checks a requirement ("name", "name==1.2",
// "name>=1,<2", "name[extra]==1") and returns its normalized name. The
// error wraps ErrBadRequirement.
func ParseRequirement(req string) (string, error) {
	req = strings.TrimSpace(req)
	if len(req) > 200 {
		return "", fmt.Errorf("%w: longer than 200 characters", ErrBadRequirement)
	}
	m := requirementRe.FindStringSubmatch(req)
	if m == nil {
		return "", fmt.Errorf("%w %q: want a package name with an optional version, like name==1.2", ErrBadRequirement, req)
	}
	return normName(m[1]), nil
}

// wheelNameRe parses a wheel file name (PEP 427):
// {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl.
var wheelNameRe = regexp.MustCompile(`^([A-Za-z0-9_.]+)-([A-Za-z0-9_.!+]+)(-[0-9][A-Za-z0-9_.]*)?-([A-Za-z0-9_.]+)-([A-Za-z0-9_.]+)-([A-Za-z0-9_.]+)\.whl$`)

// wheelInfo returns the normalized distribution name, the version and
// whether the wheel is built for a platform (native code) from its file
// name.
func wheelInfo(file string) (name, version string, native bool, ok bool) {
	m := wheelNameRe.FindStringSubmatch(filepath.Base(file))
	if m == nil {
		return "", "", false, false
	}
	return normName(m[1]), m[2], m[6] != "any" || m[5] != "none", true
}

// The warning table (SANDBOX.md §4.4): what a package brings to scripts.
var wideningTable = []struct {
	names []string
	why   string
}{
	{[]string{"numpy"}, "loads native code through ctypes (numpy.ctypeslib.load_library), which raises no audit events"},
	{[]string{"cffi"}, "loads arbitrary shared libraries (native code, no audit events)"},
	{[]string{"torch", "joblib", "dill", "cloudpickle", "scikit-learn"}, "pickle loaders (torch.load, joblib.load): loading a data file runs arbitrary code"},
	{[]string{"pandas", "polars", "pyarrow", "openpyxl", "h5py"}, "reads and writes files by any path (pandas.read_csv, read_pickle), outside system.files"},
	{[]string{"pyyaml", "lxml"}, "parsers that can run code or reach files and the network through data (yaml.unsafe_load, external entities)"},
	{[]string{"requests", "urllib3", "httpx", "aiohttp", "websockets", "paho-mqtt", "grpcio"}, "network clients: scripts can open connections outside system.*"},
	{[]string{"pyserial", "pymodbus", "python-can", "opcua", "asyncua", "python-snap7"}, "direct access to plant devices and buses, past the tag engine's write levels"},
	{[]string{"psutil", "sh", "plumbum", "pexpect", "paramiko", "fabric"}, "processes and remote shells"},
	{[]string{"sqlalchemy"}, "database files and connections outside system.db's scopes"},
}

// genericWidening is said of every package.
const genericWidening = "every module of the package becomes importable by scripts, and the package itself may import anything (the allow-list checks only what the script imports)"

const nativeWidening = "contains compiled code, which the audit hook cannot see into"

// widensOf returns the warnings of a package.
func widensOf(name string, native bool) []string {
	n := normName(name)
	var out []string
	for _, row := range wideningTable {
		for _, x := range row.names {
			if x == n {
				out = append(out, row.why)
			}
		}
	}
	if native {
		out = append(out, nativeWidening)
	}
	return append(out, genericWidening)
}

func (p *Pool) readManifest() (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(p.pkgRoot(), manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("sandbox: packages manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("sandbox: packages manifest: %w", err)
	}
	return m, nil
}

func (p *Pool) writeManifest(m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(p.pkgRoot(), manifestFile)
	tmp := path + "." + randName("tmp-")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("sandbox: packages manifest: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sandbox: packages manifest: %w", err)
	}
	return nil
}

// Packages lists the installed packages, sorted by name.
func (p *Pool) Packages() ([]Package, error) {
	p.mu.RLock()
	gen := p.pkgGen
	p.mu.RUnlock()
	m, err := p.readManifest()
	if err != nil {
		return nil, err
	}
	return p.packagesIn(gen, m), nil
}

func (p *Pool) packagesIn(gen string, m manifest) []Package {
	req := map[string]manifestEntry{}
	for _, e := range m.Packages {
		req[e.Name] = e
	}
	out := []Package{}
	for _, d := range readDists(gen) {
		pk := Package{Name: d.name, Version: d.version, Imports: d.imports, Native: d.native,
			Widens: widensOf(d.name, d.native)}
		if pk.Imports == nil {
			pk.Imports = []string{}
		}
		if e, ok := req[normName(d.name)]; ok {
			pk.Requested, pk.Requirement, pk.Source, pk.InstalledBy, pk.InstalledAt = true, e.Requirement, e.Source, e.By, e.At
		}
		out = append(out, pk)
	}
	return out
}

// Allowed returns the import roots scripts may use now: the built-in
// allow-list and the installed packages' import names, sorted.
func (p *Pool) Allowed() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := append(append([]string{}, p.allowed...), p.installed...)
	sort.Strings(out)
	return out
}

// Upload holds uploaded wheel files until an install takes them (or Close
// drops them). It is not safe for concurrent use.
type Upload struct {
	dir   string
	files []string
	total int64
}

// NewUpload returns an empty upload in a staging directory of the data
// dir. Close it when done.
func (p *Pool) NewUpload() (*Upload, error) {
	dir := filepath.Join(p.pkgRoot(), randName(stagePrefix+"up-"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: upload: %w", err)
	}
	return &Upload{dir: dir}, nil
}

// Add stores the wheel named name (a file name; any directory part is
// dropped) read from r, at most maxWheelBytes, and checks it: the name
// parses as a wheel, the archive is intact (every member's checksum), and
// it holds the .dist-info (METADATA, WHEEL) of the distribution its name
// says. Errors wrap ErrBadWheel.
func (u *Upload) Add(name string, r io.Reader) error {
	base := filepath.Base(strings.ReplaceAll(name, `\`, "/"))
	dname, version, _, ok := wheelInfo(base)
	if !ok {
		return fmt.Errorf("%w: %q is not a wheel file name (name-version-python-abi-platform.whl)", ErrBadWheel, base)
	}
	for _, f := range u.files {
		if f == base {
			return fmt.Errorf("%w: %s uploaded twice", ErrBadWheel, base)
		}
	}
	dst := filepath.Join(u.dir, base)
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox: upload %s: %w", base, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, maxWheelBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("sandbox: upload %s: %w", base, err)
	}
	if n > maxWheelBytes {
		os.Remove(dst)
		return fmt.Errorf("%w: %s is larger than %d bytes", ErrBadWheel, base, maxWheelBytes)
	}
	if err := checkWheel(dst, dname, version); err != nil {
		os.Remove(dst)
		return fmt.Errorf("%w: %s: %v", ErrBadWheel, base, err)
	}
	u.files = append(u.files, base)
	u.total += n
	return nil
}

// Files returns the names of the wheels added.
func (u *Upload) Files() []string { return append([]string{}, u.files...) }

// Close removes what the upload still holds.
func (u *Upload) Close() error {
	if u == nil {
		return nil
	}
	return os.RemoveAll(u.dir)
}

// checkWheel opens a wheel archive, reads every member (which verifies its
// CRC) up to maxWheelUnpacked bytes in all, and looks for the dist-info of
// the distribution.
func checkWheel(path, name, version string) error {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return fmt.Errorf("not a zip archive: %v", err)
	}
	defer zr.Close()
	var total int64
	hasMeta, hasWheel := false, false
	for _, f := range zr.File {
		dir, file, _ := strings.Cut(f.Name, "/")
		if strings.HasSuffix(dir, ".dist-info") {
			n, _, _ := strings.Cut(strings.TrimSuffix(dir, ".dist-info"), "-")
			if normName(n) == name {
				hasMeta = hasMeta || file == "METADATA"
				hasWheel = hasWheel || file == "WHEEL"
			}
		}
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("member %s: %v", f.Name, err)
		}
		n, err := io.Copy(io.Discard, io.LimitReader(rc, maxWheelUnpacked-total+1))
		rc.Close()
		if err != nil {
			return fmt.Errorf("member %s: %v", f.Name, err)
		}
		total += n
		if total > maxWheelUnpacked {
			return fmt.Errorf("unpacks to more than %d bytes", int64(maxWheelUnpacked))
		}
	}
	if !hasMeta || !hasWheel {
		return fmt.Errorf("no %s-%s.dist-info with METADATA and WHEEL inside", name, version)
	}
	return nil
}

// pipEnv is the environment of pip, built from nothing (SANDBOX.md §4.1):
// no configuration file, no inherited PIP_* variable, no proxy, no prompt.
func (p *Pool) pipEnv(tmp string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"HOME=" + filepath.Join(p.cfg.DataDir, "run", "sandbox", "pip-home"),
		"TMPDIR=" + tmp,
		"PIP_CONFIG_FILE=/dev/null",
		"PIP_NO_INPUT=1",
		"PIP_DISABLE_PIP_VERSION_CHECK=1",
		"PYTHONDONTWRITEBYTECODE=",
	}
}

// pip runs `python -I -m pip args...` (the runtime's own pip, never inside
// a worker), streaming each line of its output to progress, and returns
// the last lines of its output. Its errors wrap ErrPip.
func (p *Pool) pip(ctx context.Context, tmp string, progress func(Progress), args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, pipTimeout)
	defer cancel()
	if err := os.MkdirAll(filepath.Join(p.cfg.DataDir, "run", "sandbox", "pip-home"), 0o700); err != nil {
		return "", fmt.Errorf("sandbox: pip: %w", err)
	}
	cmd := exec.CommandContext(cctx, p.python, append([]string{"-I", "-m", "pip"}, args...)...)
	cmd.Env = p.pipEnv(tmp)
	cmd.Dir = tmp
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("sandbox: pip: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return "", fmt.Errorf("sandbox: pip: start %s: %w", p.python, err)
	}
	pw.Close()
	out := &tailBuffer{}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		out.Write([]byte(line + "\n"))
		if strings.TrimSpace(line) != "" && progress != nil {
			progress(Progress{Step: "pip", Message: line})
		}
	}
	pr.Close()
	err = cmd.Wait()
	text := out.String()
	switch {
	case cctx.Err() != nil && ctx.Err() == nil:
		return text, fmt.Errorf("%w: pip did not finish within %v", ErrPip, pipTimeout)
	case ctx.Err() != nil:
		return text, fmt.Errorf("%w: %v", ErrPip, ctx.Err())
	case err != nil:
		if strings.Contains(text, "No module named pip") {
			return text, fmt.Errorf("%w (%s): %s", ErrNoPip, p.python, lastLine(text))
		}
		return text, fmt.Errorf("%w: %s", ErrPip, pipReason(text))
	}
	return text, nil
}

var noMatchRe = regexp.MustCompile(`No matching distribution found for (\S+)`)

// pipReason is the useful part of pip's output on failure.
func pipReason(out string) string {
	if m := noMatchRe.FindStringSubmatch(out); m != nil {
		return fmt.Sprintf("no wheel found for %s (every dependency must be available as a wheel for this runtime: "+
			"upload it with the others, or check python.index_url)", m[1])
	}
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "ERROR:") {
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	if len(errs) > 0 {
		return tail(strings.Join(errs, " "), 600)
	}
	return lastLine(out)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}

// pipReport is the part of pip's installation report (--report, format 1)
// the preflight reads.
type pipReport struct {
	Install []struct {
		Requested bool `json:"requested"`
		Metadata  struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
		DownloadInfo struct {
			URL string `json:"url"`
		} `json:"download_info"`
	} `json:"install"`
}

// InstallPackage installs a package from the index (req.Requirement) or
// uploaded wheels (req.Upload), with pip, into a fresh directory holding
// every package an administrator requested (the manifest), then switches
// <data_dir>/python-packages to it in one rename and restarts the workers
// one at a time so they import it (rolling; InstallPackage returns when
// every worker runs the new set, or after a minute). The running set is
// untouched when anything fails.
//
//   - From the index: pip download --only-binary=:all: from
//     python.index_url (ErrOffline when empty) into the wheelhouse, then
//     the install with --no-index from the wheelhouse, so any later set
//     can be rebuilt offline.
//   - Uploads: a dry run with --no-index over the uploaded wheels and the
//     wheelhouse names every package the install brings and every missing
//     dependency, before anything changes.
//
// Without req.Acknowledge nothing is installed: the error is a
// *WideningError naming every package the install would bring and what it
// widens (resolved by the same download or dry run). Progress is called
// with each step and each line of pip's output. Other errors wrap
// ErrPackagesBusy, ErrBadRequirement, ErrPip, ErrNoPip, or are a
// *RunError of kind runtime_missing.
func (p *Pool) InstallPackage(ctx context.Context, req PackageRequest, progress func(Progress)) (PackageChange, error) {
	start := time.Now()
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := p.packagesReady(); err != nil {
		return PackageChange{}, err
	}
	if (req.Requirement == "") == (req.Upload == nil || len(req.Upload.files) == 0) {
		return PackageChange{}, fmt.Errorf("%w: give either a requirement or wheel files", ErrBadRequirement)
	}
	var reqName string
	if req.Requirement != "" {
		var err error
		if reqName, err = ParseRequirement(req.Requirement); err != nil {
			return PackageChange{}, err
		}
		if p.cfg.IndexURL == "" {
			return PackageChange{}, fmt.Errorf("install %s: %w", req.Requirement, ErrOffline)
		}
	}
	if !p.pkgMu.TryLock() {
		return PackageChange{}, ErrPackagesBusy
	}
	defer p.pkgMu.Unlock()

	stage := filepath.Join(p.pkgRoot(), randName(stagePrefix))
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return PackageChange{}, fmt.Errorf("sandbox: packages: %w", err)
	}
	defer os.RemoveAll(stage)

	var (
		widen   []Widening
		newWhls []string // wheel files to add to the wheelhouse
		entries []manifestEntry
		now     = time.Now().UTC()
	)
	if req.Requirement != "" {
		progress(Progress{Step: "download", Message: "downloading " + req.Requirement + " and its dependencies from " + p.cfg.IndexURL})
		dl := filepath.Join(stage, "download")
		if _, err := p.pip(ctx, stage, progress, "download", "--only-binary=:all:", "--dest", dl,
			"--index-url", p.cfg.IndexURL, "--find-links", p.wheelhouse(), "--timeout", "15", "--retries", "1",
			"--progress-bar", "off", "--no-input", "--disable-pip-version-check", req.Requirement); err != nil {
			return PackageChange{}, fmt.Errorf("install %s: %w", req.Requirement, err)
		}
		files, _ := filepath.Glob(filepath.Join(dl, "*.whl"))
		sort.Strings(files)
		for _, f := range files {
			n, v, native, ok := wheelInfo(f)
			if !ok {
				continue
			}
			widen = append(widen, Widening{Package: n, Version: v, Requested: n == reqName, Widens: widensOf(n, native)})
			newWhls = append(newWhls, f)
		}
		entries = append(entries, manifestEntry{Name: reqName, Requirement: strings.TrimSpace(req.Requirement),
			Source: "index", By: req.By, At: now})
	} else {
		progress(Progress{Step: "resolve", Message: "checking the uploaded wheels and their dependencies (no index)"})
		var reqs []string
		for _, f := range req.Upload.files {
			n, v, _, _ := wheelInfo(f)
			reqs = append(reqs, n+"=="+v)
			entries = append(entries, manifestEntry{Name: n, Requirement: n + "==" + v, Pinned: n + "==" + v,
				Source: "upload", By: req.By, At: now})
			newWhls = append(newWhls, filepath.Join(req.Upload.dir, f))
		}
		report := filepath.Join(stage, "report.json")
		args := []string{"install", "--dry-run", "--ignore-installed", "--report", report, "--target", filepath.Join(stage, "dry"),
			"--only-binary=:all:", "--no-index", "--find-links", req.Upload.dir, "--find-links", p.wheelhouse(),
			"--progress-bar", "off", "--no-input", "--disable-pip-version-check"}
		if _, err := p.pip(ctx, stage, progress, append(args, reqs...)...); err != nil {
			return PackageChange{}, fmt.Errorf("install %s: %w", strings.Join(req.Upload.files, ", "), err)
		}
		var rep pipReport
		b, err := os.ReadFile(report)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			return PackageChange{}, fmt.Errorf("sandbox: pip's installation report: %w", err)
		}
		for _, it := range rep.Install {
			native := false
			if _, _, nat, ok := wheelInfo(it.DownloadInfo.URL); ok {
				native = nat
			}
			n := normName(it.Metadata.Name)
			requested := false
			for _, e := range entries {
				requested = requested || e.Name == n
			}
			widen = append(widen, Widening{Package: n, Version: it.Metadata.Version, Requested: requested,
				Widens: widensOf(n, native)})
		}
	}
	sort.SliceStable(widen, func(i, j int) bool { return widen[i].Requested && !widen[j].Requested })
	if !req.Acknowledge {
		return PackageChange{}, &WideningError{Widenings: widen}
	}

	for _, f := range newWhls {
		dst := filepath.Join(p.wheelhouse(), filepath.Base(f))
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if err := copyFile(f, dst); err != nil {
			return PackageChange{}, fmt.Errorf("sandbox: wheelhouse: %w", err)
		}
	}
	m, err := p.readManifest()
	if err != nil {
		return PackageChange{}, err
	}
	for _, e := range entries {
		m.Packages = replaceEntry(m.Packages, e)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	ch, err := p.applyManifest(ctx, m, progress)
	if err != nil {
		return PackageChange{}, err
	}
	ch.Action, ch.Packages, ch.Widenings = "install", names, widen
	ch.DurationMs = time.Since(start).Milliseconds()
	for i := range ch.Widenings {
		for _, pk := range ch.Installed {
			if normName(pk.Name) == ch.Widenings[i].Package {
				ch.Widenings[i].Imports = pk.Imports
			}
		}
	}
	return ch, nil
}

func replaceEntry(list []manifestEntry, e manifestEntry) []manifestEntry {
	out := list[:0:0]
	for _, x := range list {
		if x.Name != e.Name {
			out = append(out, x)
		}
	}
	out = append(out, e)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RemovePackage removes a package an administrator installed: the
// remaining manifest is installed offline from the wheelhouse into a
// fresh directory, switched to and the workers restarted, as for
// InstallPackage. Errors wrap ErrNotInstalled, ErrIsDependency,
// ErrPackagesBusy or ErrPip.
func (p *Pool) RemovePackage(ctx context.Context, name string, progress func(Progress)) (PackageChange, error) {
	start := time.Now()
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := p.packagesReady(); err != nil {
		return PackageChange{}, err
	}
	n := normName(name)
	if !p.pkgMu.TryLock() {
		return PackageChange{}, ErrPackagesBusy
	}
	defer p.pkgMu.Unlock()
	m, err := p.readManifest()
	if err != nil {
		return PackageChange{}, err
	}
	var keep []manifestEntry
	found := false
	for _, e := range m.Packages {
		if e.Name == n {
			found = true
			continue
		}
		keep = append(keep, e)
	}
	if !found {
		p.mu.RLock()
		gen := p.pkgGen
		p.mu.RUnlock()
		for _, d := range readDists(gen) {
			if normName(d.name) == n {
				return PackageChange{}, fmt.Errorf("remove %s: %w (remove the package that needs it)", name, ErrIsDependency)
			}
		}
		return PackageChange{}, fmt.Errorf("remove %s: %w", name, ErrNotInstalled)
	}
	m.Packages = keep
	ch, err := p.applyManifest(ctx, m, progress)
	if err != nil {
		return PackageChange{}, err
	}
	ch.Action, ch.Packages = "remove", []string{n}
	ch.DurationMs = time.Since(start).Milliseconds()
	return ch, nil
}

// packagesReady fails when there is no runtime to run pip with.
func (p *Pool) packagesReady() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.python == "" || p.pkgGen == "" {
		return runErr(KindRuntimeMissing, "the Python runtime is missing, so packages cannot be installed (%s)", p.reason)
	}
	return nil
}

// applyManifest installs m offline from the wheelhouse into a new
// generation, switches to it, writes the manifest, restarts the workers
// and removes old generations and unused wheels.
func (p *Pool) applyManifest(ctx context.Context, m manifest, progress func(Progress)) (PackageChange, error) {
	gen := filepath.Join(p.pkgRoot(), randName(genPrefix))
	if err := os.Mkdir(gen, 0o755); err != nil {
		return PackageChange{}, fmt.Errorf("sandbox: packages: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(gen)
		}
	}()
	if len(m.Packages) > 0 {
		var reqs []string
		for _, e := range m.Packages {
			r := e.Pinned
			if r == "" {
				r = e.Requirement
			}
			reqs = append(reqs, r)
		}
		progress(Progress{Step: "install", Message: "installing " + strings.Join(reqs, " ") + " into a new directory"})
		tmp := filepath.Join(p.pkgRoot(), randName(stagePrefix+"tmp-"))
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return PackageChange{}, fmt.Errorf("sandbox: packages: %w", err)
		}
		defer os.RemoveAll(tmp)
		args := []string{"install", "--target", gen, "--only-binary=:all:", "--no-index", "--find-links", p.wheelhouse(),
			"--no-warn-script-location", "--progress-bar", "off", "--no-input", "--disable-pip-version-check"}
		if _, err := p.pip(ctx, tmp, progress, append(args, reqs...)...); err != nil {
			return PackageChange{}, err
		}
	}
	dists := readDists(gen)
	versions := map[string]string{}
	for _, d := range dists {
		versions[normName(d.name)] = d.version
	}
	for i, e := range m.Packages {
		v, found := versions[e.Name]
		if !found {
			return PackageChange{}, fmt.Errorf("%w: %s is not in the installed set (pip installed %d packages)", ErrPip, e.Name, len(dists))
		}
		m.Packages[i].Pinned = e.Name + "==" + v
	}
	progress(Progress{Step: "swap", Message: "switching python-packages to the new set"})
	if err := p.writeManifest(m); err != nil {
		return PackageChange{}, err
	}
	if err := p.link(gen); err != nil {
		return PackageChange{}, err
	}
	ok = true
	p.mu.RLock()
	old := p.pkgGen
	p.mu.RUnlock()
	p.setGeneration(gen)
	progress(Progress{Step: "restart", Message: "restarting the workers one at a time"})
	if err := p.rollWorkers(ctx); err != nil {
		progress(Progress{Step: "restart", Message: err.Error()})
	}
	p.cleanGenerations(gen)
	if old != gen {
		os.RemoveAll(old)
	}
	p.pruneWheelhouse(dists)
	return PackageChange{Installed: p.packagesIn(gen, m), Allowed: p.Allowed()}, nil
}

// pruneWheelhouse removes the wheels of distributions no longer installed.
func (p *Pool) pruneWheelhouse(dists []dist) {
	keep := map[string]bool{}
	for _, d := range dists {
		keep[normName(d.name)] = true
	}
	files, _ := filepath.Glob(filepath.Join(p.wheelhouse(), "*.whl"))
	for _, f := range files {
		if n, _, _, ok := wheelInfo(f); ok && !keep[n] {
			if err := os.Remove(f); err != nil {
				p.logger.Warn("sandbox: unused wheel not removed", "file", f, "err", err)
			}
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + "." + randName("tmp-")
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}
