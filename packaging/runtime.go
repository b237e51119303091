package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
)

// RuntimeManifestName is the runtime's manifest, at the top of python/.
const RuntimeManifestName = "runtime-manifest.json"

// RuntimeManifest records what the private Python runtime was made from:
// the Debian packages and their versions, the shared-library packages it
// needs (the .deb's Depends:), and every file's SHA-256.
type RuntimeManifest struct {
	Python   string            `json:"python"`   // sys.version of the copy
	Arch     string            `json:"arch"`     // GOARCH
	Packages map[string]string `json:"packages"` // Debian package → version the files came from
	Depends  []string          `json:"depends"`  // Debian packages of the shared libraries it links
	Trimmed  []string          `json:"trimmed"`  // what was left out, and why it may be
	Files    map[string]string `json:"files"`    // path → sha256
}

// What is left out of the copied standard library: tests, the IDE, Tk, the
// pip bootstrapper (pip itself is copied), caches, the static library for
// building C extensions (wheels only are installed), and the extension
// modules that drag in terminal, dbm or NIS libraries scripts never use.
var (
	trimDirs = []string{"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3/tests", "distutils/tests",
		"unittest/test", "ctypes/test", "sqlite3/test", "config-3.11-" + debArchTriplet()}
	trimExt = regexp.MustCompile(`^(_test.*|_ctypes_test|xxlimited.*|_xxtestfuzz|_xxsubinterpreters|_tkinter|readline|_curses|_curses_panel|_dbm|_gdbm|nis|ossaudiodev)\.cpython-`)
	// pip, setuptools and wheel from Debian's python3-pip, python3-setuptools
	// and python3-wheel.
	distPackages = []string{"pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel", "distutils-precedence.pth"}
)

func debArchTriplet() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// buildRuntime copies Debian's python3.11 and its standard library into out
// (bin/python3.11, bin/python3 → python3.11, lib/python3.11/...), adds pip,
// setuptools and wheel under lib/python3.11/dist-packages (on sys.path
// under -I, as the interpreter's own site-packages), trims it, and writes
// the runtime manifest. It runs from out with an empty environment: the
// prefix is found from the executable's location.
func buildRuntime(out, python string) (*RuntimeManifest, error) {
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	lib := "/usr/lib/python3.11"
	for _, d := range []string{"bin", "lib"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := copyFile(python, filepath.Join(out, "bin", "python3.11")); err != nil {
		return nil, err
	}
	if err := os.Symlink("python3.11", filepath.Join(out, "bin", "python3")); err != nil {
		return nil, err
	}
	trimmed := map[string]bool{}
	err := copyTree(lib, filepath.Join(out, "lib", "python3.11"), func(rel string, d fs.DirEntry) bool {
		base := d.Name()
		if d.IsDir() && (base == "__pycache__" || base == "site-packages" || base == "dist-packages") {
			return false
		}
		if rel == "sitecustomize.py" { // Debian's link to /etc/python3.11 (the apport hook)
			trimmed["sitecustomize.py"] = true
			return false
		}
		for _, t := range trimDirs {
			if rel == t {
				trimmed[t+"/"] = true
				return false
			}
		}
		if strings.HasPrefix(rel, "lib-dynload/") && trimExt.MatchString(base) {
			trimmed["lib-dynload/"+strings.SplitN(base, ".", 2)[0]] = true
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	site := filepath.Join(out, "lib", "python3.11", "dist-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/usr/lib/python3/dist-packages")
	if err != nil {
		return nil, fmt.Errorf("python3-pip is not installed: %w", err)
	}
	for _, e := range ents {
		keep := false
		for _, p := range distPackages {
			if e.Name() == p || strings.HasPrefix(e.Name(), p+"-") && (strings.HasSuffix(e.Name(), ".dist-info") || strings.HasSuffix(e.Name(), ".egg-info")) {
				keep = true
			}
		}
		if !keep {
			continue
		}
		src := filepath.Join("/usr/lib/python3/dist-packages", e.Name())
		if e.IsDir() {
			err = copyTree(src, filepath.Join(site, e.Name()), func(rel string, d fs.DirEntry) bool { return d.Name() != "__pycache__" })
		} else {
			err = copyFile(src, filepath.Join(site, e.Name()))
		}
		if err != nil {
			return nil, err
		}
	}
	for _, t := range []string{"tests of the standard library (test/, */tests)", "idlelib, tkinter, turtledemo: no display on an appliance",
		"ensurepip: pip is copied from python3-pip", "__pycache__ of the Debian files: recompiled at build time (unchecked-hash .pyc, the slot being read-only)",
		"config-3.11-*: the static library for building C extensions (only wheels are installed)",
		"readline, _curses, _dbm, _gdbm, nis, ossaudiodev, _tkinter and the _test* modules: terminal, dbm and test modules scripts never use",
		"sitecustomize.py: Debian's link to /etc/python3.11 (the apport crash hook), outside the runtime"} {
		trimmed[t] = true
	}
	m := &RuntimeManifest{Arch: runtime.GOARCH, Packages: map[string]string{}, Files: map[string]string{}}
	for t := range trimmed {
		if strings.Contains(t, " ") {
			m.Trimmed = append(m.Trimmed, t)
		}
	}
	sort.Strings(m.Trimmed)
	// Byte-code compiled now, in the unchecked-hash mode: the slot is
	// read-only to the daemon and its workers (no __pycache__ can be
	// written there), and the sources never change under an installed
	// slot, so the .pyc files are used as they are.
	py := filepath.Join(out, "bin", "python3")
	if b, err := exec.Command(py, "-I", "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
		filepath.Join(out, "lib", "python3.11")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compileall: %v: %s", err, b)
	}
	v, err := exec.Command(py, "-I", "-B", "-c", "import sys; print(sys.version.split()[0])").Output()
	if err != nil {
		return nil, fmt.Errorf("the copied runtime does not run: %w", err)
	}
	m.Python = strings.TrimSpace(string(v))
	for _, p := range []string{python, lib + "/os.py", lib + "/email/__init__.py", "/usr/lib/python3/dist-packages/pip", "/usr/lib/python3/dist-packages/setuptools", "/usr/lib/python3/dist-packages/wheel"} {
		if pkg, err := dpkgOwner(p); err == nil {
			m.Packages[pkg] = dpkgVersion(pkg)
		}
	}
	if m.Depends, err = sharedLibDepends(out); err != nil {
		return nil, err
	}
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		m.Files[filepath.ToSlash(rel)] = sum
		return nil
	})
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(m, "", " ")
	return m, os.WriteFile(filepath.Join(out, RuntimeManifestName), append(b, '\n'), 0o644)
}

// sharedLibDepends lists the Debian packages owning the shared libraries
// that the interpreter and its extension modules load (ldd, then dpkg -S),
// sorted and without duplicates. A library no package owns is an error:
// the .deb would not say what it needs.
func sharedLibDepends(dir string) ([]string, error) {
	var elves []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && (strings.HasSuffix(p, ".so") || filepath.Base(p) == "python3.11") {
			elves = append(elves, p)
		}
		return nil
	})
	libs := map[string]bool{}
	for _, e := range elves {
		out, err := exec.Command("ldd", e).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", e, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				libs[f[2]] = true
			case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
				libs[f[0]] = true // the ELF interpreter
			case strings.Contains(line, "not found"):
				return nil, fmt.Errorf("%s: %s", e, strings.TrimSpace(line))
			}
		}
	}
	pkgs := map[string]bool{}
	for l := range libs {
		pkg, err := dpkgOwner(l)
		if err != nil {
			return nil, fmt.Errorf("no Debian package owns %s (needed by the runtime): %w", l, err)
		}
		pkgs[pkg] = true
	}
	var out []string
	for p := range pkgs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// dpkgOwner is the package owning path (dpkg -S), resolving the /lib →
// /usr/lib merge both ways.
func dpkgOwner(path string) (string, error) {
	cands := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		cands = append(cands, real)
	}
	for _, c := range append([]string(nil), cands...) {
		if s, ok := strings.CutPrefix(c, "/usr"); ok {
			cands = append(cands, s)
		} else {
			cands = append(cands, "/usr"+c)
		}
	}
	for _, c := range cands {
		out, err := exec.Command("dpkg", "-S", c).Output()
		if err != nil {
			continue
		}
		line := strings.SplitN(string(out), "\n", 2)[0]
		pkg, _, ok := strings.Cut(line, ": ")
		if !ok || strings.Contains(pkg, ",") {
			continue // diversions, several owners
		}
		pkg, _, _ = strings.Cut(pkg, ":") // libc6:amd64
		return pkg, nil
	}
	return "", errors.New("dpkg -S found no owner")
}

func dpkgVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(out))
}

func fileSHA256(p string) (string, error) {
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

// copyTree copies src to dst (files, directories, symlinks), keeping modes;
// keep decides for each entry (relative slash path) whether it is copied.
func copyTree(src, dst string, keep func(rel string, d fs.DirEntry) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && keep != nil && !keep(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		t := filepath.Join(dst, filepath.FromSlash(rel))
		switch {
		case d.IsDir():
			return os.MkdirAll(t, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, t)
		case d.Type().IsRegular():
			return copyFile(p, t)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
