package api

import (
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// The routes of the script sandbox's administration (api/testdata/routes.md:
// "/sandbox/... (config, packages, upload, check) | sandbox_admin"): every
// one needs the sandbox_admin permission ("Manage the script sandbox"),
// reads included. Installs answer NDJSON progress (sandbox_handlers.go) and
// keep the long write deadline; the wheel upload takes up to
// MaxWheelUpload bytes and lifts the read deadline while it reads them.
// They join THE route table in routes.go (one init line), so the
// middleware enforces their rows like every other's and routes_test.go
// checks them against the contract's route table (testdata/routes.md).
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

// The sandbox routes' own errors are the service layer's: a
// *WideningError (409 with the widenings), ErrPackageConflict (409),
// ErrInstallFailed (502), and the package's sentinels (ErrInvalid for a
// bad requirement or wheel, ErrNotFound for a package that is not
// installed, a *gateway.ScriptError of kind runtime_missing without a
// runtime).
var (
	// ErrPackageConflict is gateway.ErrConflict: another install is
	// running, the package to remove is a dependency of another, or no
	// index is configured for an install from it. 409, kind "conflict".
	ErrPackageConflict = gateway.ErrConflict
	// ErrInstallFailed is gateway.ErrInstallFailed: pip failed; nothing
	// changed. 502, kind "install_failed".
	ErrInstallFailed = gateway.ErrInstallFailed
)

// WideningError refuses an install that was not acknowledged
// (gateway.WideningError). The server answers 409 with a WideningProblem.
type WideningError = gateway.WideningError

// WheelFiles yields the files of a wheel upload one at a time
// (gateway.WheelFiles).
type WheelFiles = gateway.WheelFiles
