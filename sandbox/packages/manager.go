package packages

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Manager.
type Options struct {
	// DataDir is the daemon's data dir: packages live in
	// <DataDir>/python-packages (a symlink to the current generation) and
	// <DataDir>/python-packages.d; pip's home is
	// <DataDir>/run/sandbox/pip-home.
	DataDir string
	// IndexURL is python.index_url: the index installs download from;
	// empty means offline (uploaded wheels only, ErrOffline).
	IndexURL string
	// Builtin is the import allow-list every script has (system, math,
	// json, datetime); Allowed adds the installed packages' names to it.
	Builtin []string
	// Restart, when set, is called after a switch to a new generation: the
	// sandbox restarts its workers one at a time so they import it, and
	// returns when they all run it (an error is reported as a progress
	// step; the workers go on restarting).
	Restart func(ctx context.Context) error
	// Logger receives warnings about directories that could not be
	// removed; nil discards them.
	Logger *slog.Logger
}

// Manager installs and removes the administrator's Python packages for the
// script sandbox. One install or removal runs at a time; the others are
// refused with ErrPackagesBusy. Its methods are safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger
	dir  string // <DataDir>/python-packages

	mu      sync.RWMutex
	python  string // the resolved interpreter, "" without a runtime
	reason  string // why there is no runtime
	gen     string // the current generation directory
	imports []string

	opMu sync.Mutex // one install or removal at a time
}

// New returns a manager over opts.DataDir. Nothing is touched before Init.
func New(opts Options) *Manager {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, log: log, dir: filepath.Join(opts.DataDir, "python-packages")}
}

// Init prepares the packages directory for the resolved interpreter python:
// <DataDir>/python-packages becomes a symlink to a generation (a plain
// directory found there is adopted as the first one), staging directories
// and old generations left by a crash are removed, and the installed
// import names are read. Installs and removals need Init to have
// succeeded.
func (pm *Manager) Init(python string) error {
	pm.mu.Lock()
	pm.python, pm.reason = python, ""
	pm.mu.Unlock()
	return pm.initPackages()
}

// SetUnavailable records why the runtime is unavailable (the sandbox is
// degraded): installs and removals made without a runtime (no successful
// Init) fail with ErrNoRuntime naming reason.
func (pm *Manager) SetUnavailable(reason string) {
	pm.mu.Lock()
	pm.reason = reason
	pm.mu.Unlock()
}

// Dir is <DataDir>/python-packages, the directory on the workers' module
// path.
func (pm *Manager) Dir() string { return pm.dir }

// Current returns the current generation directory ("" before Init) and
// the installed packages' top-level import names, sorted.
func (pm *Manager) Current() (gen string, imports []string) {
	pm.mu.RLock()
	defer pm.mu.RUnlock()
	return pm.gen, append([]string{}, pm.imports...)
}

// Root is <DataDir>/python-packages.d: the generations (Dir links to one),
// the wheelhouse, the manifest and staging directories. Workers read the
// generations through Dir's symlink, so Root must be readable to them.
func (pm *Manager) Root() string { return filepath.Join(pm.opts.DataDir, pkgDirName) }

func (pm *Manager) root() string       { return pm.Root() }
func (pm *Manager) wheelhouse() string { return filepath.Join(pm.root(), wheelhouseDir) }

func (pm *Manager) restartWorkers(ctx context.Context) error {
	if pm.opts.Restart == nil {
		return nil
	}
	return pm.opts.Restart(ctx)
}

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
func (pm *Manager) initPackages() error {
	root := pm.root()
	if err := os.MkdirAll(filepath.Join(root, wheelhouseDir), 0o755); err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	fi, err := os.Lstat(pm.dir)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		if _, err := os.Stat(pm.dir); err != nil { // dangling
			if err := pm.newEmptyGeneration(); err != nil {
				return err
			}
		}
	case err == nil && fi.IsDir():
		gen := filepath.Join(root, randName(genPrefix))
		if err := os.Rename(pm.dir, gen); err != nil {
			return fmt.Errorf("sandbox: packages: adopt %s: %w", pm.dir, err)
		}
		if err := pm.link(gen); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		if err := pm.newEmptyGeneration(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("sandbox: packages: %w", err)
	default:
		return fmt.Errorf("sandbox: packages: %s is neither a directory nor a symlink", pm.dir)
	}
	gen, err := filepath.EvalSymlinks(pm.dir)
	if err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	pm.setGeneration(gen)
	pm.cleanGenerations(gen)
	return nil
}

func (pm *Manager) newEmptyGeneration() error {
	gen := filepath.Join(pm.root(), randName(genPrefix))
	if err := os.Mkdir(gen, 0o755); err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	return pm.link(gen)
}

// link points <data>/python-packages at gen atomically: a new symlink
// renamed over the old one (rename(2) replaces it in one step).
func (pm *Manager) link(gen string) error {
	rel, err := filepath.Rel(filepath.Dir(pm.dir), gen)
	if err != nil {
		rel = gen
	}
	tmp := pm.dir + "." + randName("tmp-")
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("sandbox: packages: %w", err)
	}
	if err := os.Rename(tmp, pm.dir); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sandbox: packages: switch to %s: %w", gen, err)
	}
	return nil
}

// setGeneration makes gen the packages of workers started from now on.
func (pm *Manager) setGeneration(gen string) {
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
	pm.mu.Lock()
	pm.gen = gen
	pm.imports = roots
	pm.mu.Unlock()
}

// cleanGenerations removes every generation but keep and every staging
// directory.
func (pm *Manager) cleanGenerations(keep ...string) {
	entries, err := os.ReadDir(pm.root())
	if err != nil {
		return
	}
	for _, e := range entries {
		full := filepath.Join(pm.root(), e.Name())
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
				pm.log.Warn("sandbox: old packages directory not removed", "dir", full, "err", err)
			}
		}
	}
}
