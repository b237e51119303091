package packages

import (
	"archive/zip"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

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

// The warning table: what a package brings to scripts, by the package
// names that bring it.
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

// GenericWidening is the warning said of every package (the last of its
// Widens).
const GenericWidening = "every module of the package becomes importable by scripts, and the package itself may import anything (the allow-list checks only what the script imports)"

// NativeWidening is the warning said of a package with compiled code.
const NativeWidening = "contains compiled code, which the audit hook cannot see into"

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
		out = append(out, NativeWidening)
	}
	return append(out, GenericWidening)
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
func (pm *Manager) NewUpload() (*Upload, error) {
	dir := filepath.Join(pm.root(), randName(stagePrefix+"up-"))
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
