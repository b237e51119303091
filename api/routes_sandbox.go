package api

import (
	"context"
	"errors"
	"io"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
)

// The routes of the script sandbox's administration (DESIGN.md, REST:
// "/sandbox/... (config, packages, upload, check) | sandbox_admin"): every
// one needs the sandbox_admin permission ("Manage the script sandbox"),
// reads included. Installs answer NDJSON progress (sandbox_handlers.go) and
// keep the long write deadline; the wheel upload takes up to
// MaxWheelUpload bytes and lifts the read deadline while it reads them.
// They join THE route table in routes.go (one init line), so the
// middleware enforces their rows like every other's and routes_test.go
// checks them against DESIGN.md's table.
var sandboxRoutes = []route{
	{method: "GET", path: prefix + "/sandbox/config", need: perm(auth.SandboxAdmin), handle: (*Server).sandboxConfig},
	{method: "GET", path: prefix + "/sandbox/packages", need: perm(auth.SandboxAdmin), handle: (*Server).listPackages},
	{method: "POST", path: prefix + "/sandbox/packages", need: perm(auth.SandboxAdmin), longWrite: true,
		handle: (*Server).installPackage},
	{method: "POST", path: prefix + "/sandbox/packages/upload", need: perm(auth.SandboxAdmin), longWrite: true,
		bodyLimit: MaxWheelUpload, handle: (*Server).uploadPackages},
	{method: "DELETE", path: prefix + "/sandbox/packages/{name}", need: perm(auth.SandboxAdmin), longWrite: true,
		handle: (*Server).removePackage},
	{method: "GET", path: prefix + "/sandbox/check", need: perm(auth.SandboxAdmin), handle: (*Server).checkIndex},
}

// MaxWheelUpload is the body limit of POST /sandbox/packages/upload: all
// the wheel files of one upload together (256 MiB).
const MaxWheelUpload = 256 << 20

// Errors a SandboxAdmin wraps to choose the status of its answer (besides
// the package's sentinels: ErrInvalid for a bad requirement or wheel,
// ErrNotFound for a package that is not installed, and a ScriptError of
// kind runtime_missing without a runtime).
var (
	// ErrPackageConflict: the request conflicts with the sandbox's state:
	// another install is running, the package to remove is a dependency of
	// another, or no index is configured for an install from it. 409, kind
	// "conflict".
	ErrPackageConflict = errors.New("package operation refused")
	// ErrInstallFailed: pip failed (the index is unreachable, a wheel is
	// missing, a package does not fit the runtime); nothing changed. 502.
	ErrInstallFailed = errors.New("install failed")
)

// WideningError refuses an install that was not acknowledged: it names
// every package the install would bring and what each widens. The server
// answers 409 with a WideningProblem.
type WideningError struct {
	Widenings []apitypes.PackageWidening
}

// Error names the packages.
func (e *WideningError) Error() string {
	s := "installing widens the script sandbox; repeat the request with acknowledge_widening: true:"
	for _, w := range e.Widenings {
		s += " " + w.Package
	}
	return s
}

// WheelFiles yields the files of a wheel upload one at a time: the file
// name the client gave and its content, which must be read before the
// next call. It returns io.EOF after the last file.
type WheelFiles func() (name string, content io.Reader, err error)

// SandboxAdmin is the script sandbox's administration as the API sees it.
// g is the caller's grant (its principal is audited with every install and
// removal). progress, when not nil, receives each step of an install as it
// happens (the server streams them); it is called on the caller's
// goroutine.
type SandboxAdmin interface {
	// SandboxConfig returns the sandbox's configuration and state.
	SandboxConfig(ctx context.Context) (apitypes.SandboxConfig, error)
	// ListPackages lists the installed packages.
	ListPackages(ctx context.Context) ([]apitypes.SandboxPackage, error)
	// InstallPackage installs req.Requirement from the configured index
	// into <data_dir>/python-packages. Without req.AcknowledgeWidening it
	// installs nothing and returns a *WideningError.
	InstallPackage(ctx context.Context, g auth.Grant, req apitypes.PackageInstallRequest,
		progress func(apitypes.PackageEvent)) (apitypes.PackageChange, error)
	// UploadPackages installs uploaded wheel files (no index), as
	// InstallPackage does. acknowledge reports acknowledge_widening; call
	// it after the last file (a form field among the files may set it).
	UploadPackages(ctx context.Context, g auth.Grant, files WheelFiles, acknowledge func() bool,
		progress func(apitypes.PackageEvent)) (apitypes.PackageChange, error)
	// RemovePackage removes a package an administrator installed.
	RemovePackage(ctx context.Context, g auth.Grant, name string) (apitypes.PackageChange, error)
	// CheckIndex says whether pip can reach the configured index, within
	// a few seconds.
	CheckIndex(ctx context.Context) apitypes.IndexCheck
}
