package gateway

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"qubiq.dev/edge/auth"
)

// Packages administers the script sandbox: its settings and the Python
// packages an administrator installs (README: Python packages for
// scripts). Every install and removal is audited with who made it.
// progress, when not nil, receives each step of an install as it happens,
// on the caller's goroutine.
//
// Errors: a bad requirement or wheel wraps ErrInvalid, a package that is
// not installed ErrNotFound, another operation running, a dependency of
// another package or an install from an index that is not configured
// ErrConflict, a pip failure ErrInstallFailed; without a runtime it is a
// *ScriptError of kind runtime_missing; an install not acknowledged is a
// *WideningError naming what it would widen (nothing installed).
type Packages interface {
	// SandboxConfig returns the sandbox's configuration and state as a
	// JSON object (its keys are the sandbox's: python, pip, limits,
	// hardening, index_url, allowed, installed, linter, ...).
	SandboxConfig(ctx context.Context) (json.RawMessage, error)
	// ListPackages lists the installed packages, sorted by name.
	ListPackages(ctx context.Context) ([]Package, error)
	// InstallPackage installs a requirement ("name==1.2") from the
	// configured index.
	InstallPackage(ctx context.Context, g auth.Grant, req PackageInstall, progress func(PackageProgress)) (PackageChange, error)
	// UploadPackages installs uploaded wheel files without an index.
	// acknowledge reports the acknowledgement; it is called after the last
	// file (a form field among the files may set it).
	UploadPackages(ctx context.Context, g auth.Grant, files WheelFiles, acknowledge func() bool, progress func(PackageProgress)) (PackageChange, error)
	// RemovePackage removes a package an administrator installed.
	RemovePackage(ctx context.Context, g auth.Grant, name string) (PackageChange, error)
	// CheckIndex says whether pip can reach the configured index, within
	// a few seconds.
	CheckIndex(ctx context.Context) IndexCheck
}

// WheelFiles yields the files of a wheel upload one at a time: the file
// name the client gave and its content, which must be read before the
// next call. It returns io.EOF after the last file.
type WheelFiles func() (name string, content io.Reader, err error)

// PackageInstall asks for an install from the index: the requirement and
// whether the caller acknowledges what it widens.
type PackageInstall struct {
	Requirement         string
	AcknowledgeWidening bool
}

// PackageProgress is one step of an install or removal: "resolve",
// "download", "install", "swap", "restart", or "pip" (a line of pip's
// output in Message).
type PackageProgress struct {
	Step    string
	Message string
}

// Package is one installed distribution: its top-level import names (on
// the scripts' allow-list), whether an administrator requested it (then
// how: requirement, source "index" or "upload", by whom and when) or it
// came as a dependency, whether it holds compiled code, and what it
// widens.
type Package struct {
	Name        string
	Version     string
	Imports     []string
	Requested   bool
	Requirement string
	Source      string
	InstalledBy string
	InstalledAt time.Time // zero for dependencies
	Native      bool
	Widens      []string
}

// PackageWidening is what one package of an install brings to scripts.
type PackageWidening struct {
	Package   string
	Version   string
	Requested bool
	Imports   []string
	Widens    []string
}

// PackageChange is the result of an install or removal: the action
// ("install", "remove") and the packages it named, the packages installed
// now, the import names scripts may use now, what the new packages widen,
// and how long it took.
type PackageChange struct {
	Action    string
	Packages  []string
	Installed []Package
	Allowed   []string
	Widenings []PackageWidening
	Duration  time.Duration
}

// IndexCheck is whether pip can reach python.index_url: the URL asked,
// whether it answered like an index, the HTTP status, how long it took in
// milliseconds, and why not when it did not.
type IndexCheck struct {
	IndexURL   string
	URL        string
	Reachable  bool
	Status     int
	DurationMS float64
	Reason     string
}
