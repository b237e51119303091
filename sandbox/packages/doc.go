// Package packages installs and removes the Python packages an
// administrator adds to the script sandbox (docs: "Python side",
// packages; POST /sandbox/packages).
//
// Packages live in <data_dir>/python-packages, a symlink to one generation
// under <data_dir>/python-packages.d switched in one rename, so they
// survive a replacement of the runtime (same Python minor version). Every
// install is the whole manifest of requested packages, installed with the
// runtime's own pip into a fresh directory from a wheelhouse that keeps
// every wheel, so removals and rebuilds need no network: from
// python.index_url with --only-binary=:all:, or from uploaded wheel files
// (checked as they arrive) with --no-index. Nothing changes without the
// administrator's acknowledgement of what each package widens (a
// *WideningError lists it). After a switch the Manager's Restart hook lets
// the sandbox restart its workers one at a time; the installed packages'
// top-level import names join the scripts' allow-list.
//
// # Imports
//
// packages imports the standard library only. The sandbox (sandbox.Pool)
// owns a Manager and hands it out with PackageManager; the service layer
// calls it for the sandbox_admin routes and audits every change.
package packages
