package packages

import (
	"errors"
	"strings"
	"time"
)

// Errors of the package operations (README: Python packages for scripts).
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
	// ErrNoRuntime: there is no Python runtime (it is missing or failed
	// to start), so nothing can be installed; the text says why. The
	// service answers it as runtime_missing.
	ErrNoRuntime = errors.New("no Python runtime")
)

// WideningError refuses an install that was not acknowledged: every
// installed package widens what scripts can do (the package doc; the
// warning table in wheels.go). Widenings names each package the install would bring,
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

// Change is the result of an install or removal: what was asked
// (Action "install" or "remove", Packages), the packages installed now,
// the import names scripts may use now (Allowed: the built-in allow-list
// and every installed package's imports), what the new packages widen, and
// how long it took.
type Change struct {
	Action     string     `json:"action"`
	Packages   []string   `json:"packages"`
	Installed  []Package  `json:"installed"`
	Allowed    []string   `json:"allowed"`
	Widenings  []Widening `json:"widenings,omitempty"`
	DurationMs int64      `json:"duration_ms"`
}

// Request asks for an install: either Requirement ("name==1.2",
// from python.index_url) or Upload (wheel files, installed with
// --no-index). Acknowledge must be true (acknowledge_widening) or the
// install is refused with a *WideningError. By names who asked (the
// manifest keeps it; the caller audits).
type Request struct {
	Requirement string
	Upload      *Upload
	Acknowledge bool
	By          string
}

// manifestEntry is one administrator-requested package: the installs are
// always the whole manifest into a fresh directory (the package doc).
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
