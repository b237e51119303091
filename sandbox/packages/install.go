package packages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

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
func (pm *Manager) Install(ctx context.Context, req Request, progress func(Progress)) (Change, error) {
	start := time.Now()
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := pm.packagesReady(); err != nil {
		return Change{}, err
	}
	if (req.Requirement == "") == (req.Upload == nil || len(req.Upload.files) == 0) {
		return Change{}, fmt.Errorf("%w: give either a requirement or wheel files", ErrBadRequirement)
	}
	var reqName string
	if req.Requirement != "" {
		var err error
		if reqName, err = ParseRequirement(req.Requirement); err != nil {
			return Change{}, err
		}
		if pm.opts.IndexURL == "" {
			return Change{}, fmt.Errorf("install %s: %w", req.Requirement, ErrOffline)
		}
	}
	if !pm.opMu.TryLock() {
		return Change{}, ErrPackagesBusy
	}
	defer pm.opMu.Unlock()

	stage := filepath.Join(pm.root(), randName(stagePrefix))
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return Change{}, fmt.Errorf("sandbox: packages: %w", err)
	}
	defer os.RemoveAll(stage)

	var (
		widen   []Widening
		newWhls []string // wheel files to add to the wheelhouse
		entries []manifestEntry
		now     = time.Now().UTC()
	)
	if req.Requirement != "" {
		progress(Progress{Step: "download", Message: "downloading " + req.Requirement + " and its dependencies from " + pm.opts.IndexURL})
		dl := filepath.Join(stage, "download")
		if _, err := pm.pip(ctx, stage, progress, "download", "--only-binary=:all:", "--dest", dl,
			"--index-url", pm.opts.IndexURL, "--find-links", pm.wheelhouse(), "--timeout", "15", "--retries", "1",
			"--progress-bar", "off", "--no-input", "--disable-pip-version-check", req.Requirement); err != nil {
			return Change{}, fmt.Errorf("install %s: %w", req.Requirement, err)
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
			"--only-binary=:all:", "--no-index", "--find-links", req.Upload.dir, "--find-links", pm.wheelhouse(),
			"--progress-bar", "off", "--no-input", "--disable-pip-version-check"}
		if _, err := pm.pip(ctx, stage, progress, append(args, reqs...)...); err != nil {
			return Change{}, fmt.Errorf("install %s: %w", strings.Join(req.Upload.files, ", "), err)
		}
		var rep pipReport
		b, err := os.ReadFile(report)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			return Change{}, fmt.Errorf("sandbox: pip's installation report: %w", err)
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
		return Change{}, &WideningError{Widenings: widen}
	}

	for _, f := range newWhls {
		dst := filepath.Join(pm.wheelhouse(), filepath.Base(f))
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if err := copyFile(f, dst); err != nil {
			return Change{}, fmt.Errorf("sandbox: wheelhouse: %w", err)
		}
	}
	m, err := pm.readManifest()
	if err != nil {
		return Change{}, err
	}
	for _, e := range entries {
		m.Packages = replaceEntry(m.Packages, e)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	ch, err := pm.applyManifest(ctx, m, progress)
	if err != nil {
		return Change{}, err
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
func (pm *Manager) Remove(ctx context.Context, name string, progress func(Progress)) (Change, error) {
	start := time.Now()
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := pm.packagesReady(); err != nil {
		return Change{}, err
	}
	n := normName(name)
	if !pm.opMu.TryLock() {
		return Change{}, ErrPackagesBusy
	}
	defer pm.opMu.Unlock()
	m, err := pm.readManifest()
	if err != nil {
		return Change{}, err
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
		pm.mu.RLock()
		gen := pm.gen
		pm.mu.RUnlock()
		for _, d := range readDists(gen) {
			if normName(d.name) == n {
				return Change{}, fmt.Errorf("remove %s: %w (remove the package that needs it)", name, ErrIsDependency)
			}
		}
		return Change{}, fmt.Errorf("remove %s: %w", name, ErrNotInstalled)
	}
	m.Packages = keep
	ch, err := pm.applyManifest(ctx, m, progress)
	if err != nil {
		return Change{}, err
	}
	ch.Action, ch.Packages = "remove", []string{n}
	ch.DurationMs = time.Since(start).Milliseconds()
	return ch, nil
}

// packagesReady fails when there is no runtime to run pip with.
func (pm *Manager) packagesReady() error {
	pm.mu.RLock()
	defer pm.mu.RUnlock()
	if pm.python == "" || pm.gen == "" {
		return fmt.Errorf("%w: the Python runtime is missing, so packages cannot be installed (%s)", ErrNoRuntime, pm.reason)
	}
	return nil
}

// applyManifest installs m offline from the wheelhouse into a new
// generation, switches to it, writes the manifest, restarts the workers
// and removes old generations and unused wheels.
func (pm *Manager) applyManifest(ctx context.Context, m manifest, progress func(Progress)) (Change, error) {
	gen := filepath.Join(pm.root(), randName(genPrefix))
	if err := os.Mkdir(gen, 0o755); err != nil {
		return Change{}, fmt.Errorf("sandbox: packages: %w", err)
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
		tmp := filepath.Join(pm.root(), randName(stagePrefix+"tmp-"))
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return Change{}, fmt.Errorf("sandbox: packages: %w", err)
		}
		defer os.RemoveAll(tmp)
		args := []string{"install", "--target", gen, "--only-binary=:all:", "--no-index", "--find-links", pm.wheelhouse(),
			"--no-warn-script-location", "--progress-bar", "off", "--no-input", "--disable-pip-version-check"}
		if _, err := pm.pip(ctx, tmp, progress, append(args, reqs...)...); err != nil {
			return Change{}, err
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
			return Change{}, fmt.Errorf("%w: %s is not in the installed set (pip installed %d packages)", ErrPip, e.Name, len(dists))
		}
		m.Packages[i].Pinned = e.Name + "==" + v
	}
	progress(Progress{Step: "swap", Message: "switching python-packages to the new set"})
	if err := pm.writeManifest(m); err != nil {
		return Change{}, err
	}
	if err := pm.link(gen); err != nil {
		return Change{}, err
	}
	ok = true
	pm.mu.RLock()
	old := pm.gen
	pm.mu.RUnlock()
	pm.setGeneration(gen)
	progress(Progress{Step: "restart", Message: "restarting the workers one at a time"})
	if err := pm.restartWorkers(ctx); err != nil {
		progress(Progress{Step: "restart", Message: err.Error()})
	}
	pm.cleanGenerations(gen)
	if old != gen {
		os.RemoveAll(old)
	}
	pm.pruneWheelhouse(dists)
	return Change{Installed: pm.packagesIn(gen, m), Allowed: pm.Allowed()}, nil
}

// pruneWheelhouse removes the wheels of distributions no longer installed.
func (pm *Manager) pruneWheelhouse(dists []dist) {
	keep := map[string]bool{}
	for _, d := range dists {
		keep[normName(d.name)] = true
	}
	files, _ := filepath.Glob(filepath.Join(pm.wheelhouse(), "*.whl"))
	for _, f := range files {
		if n, _, _, ok := wheelInfo(f); ok && !keep[n] {
			if err := os.Remove(f); err != nil {
				pm.log.Warn("sandbox: unused wheel not removed", "file", f, "err", err)
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

func (pm *Manager) readManifest() (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(pm.root(), manifestFile))
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

func (pm *Manager) writeManifest(m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(pm.root(), manifestFile)
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
func (pm *Manager) Packages() ([]Package, error) {
	pm.mu.RLock()
	gen := pm.gen
	pm.mu.RUnlock()
	m, err := pm.readManifest()
	if err != nil {
		return nil, err
	}
	return pm.packagesIn(gen, m), nil
}

func (pm *Manager) packagesIn(gen string, m manifest) []Package {
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
func (pm *Manager) Allowed() []string {
	pm.mu.RLock()
	defer pm.mu.RUnlock()
	out := append(append([]string{}, pm.opts.Builtin...), pm.imports...)
	sort.Strings(out)
	return out
}
