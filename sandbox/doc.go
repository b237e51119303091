// Package sandbox runs user Python scripts for QUBIQ Edge in a pool of
// pre-started worker processes (DESIGN.md, "Python side"; SANDBOX.md).
//
// It owns the worker pool, the transport (sandbox/rpc), the cgroup limits
// (sandbox/cgroup), the scope table of the system.* methods and their
// dispatcher, the save-time check of a module, and the worker's Python side
// (sandbox/python, embedded and written to <data_dir>/run/sandbox at every
// start).
//
// # Life cycle
//
//  1. New(cfg, svc, logger) validates the config.
//  2. Start(ctx) resolves the interpreter once (symlinks followed; a pyenv
//     shim or other script is asked for sys.executable once), writes the
//     Python files, detects the isolation mode, and starts cfg.Replicas
//     workers. When the interpreter is missing or fails its handshake, Start
//     returns nil and the pool is degraded: Health says why and every Run
//     and Check fails with kind runtime_missing. There is no fall back to
//     another Python.
//  3. SetModule registers the current code of each module (the daemon
//     loads them from its store at start and after each save, having called
//     Check); Run runs an entry of a module with a grant.
//  4. Close(ctx) stops the workers and removes their cgroups.
//
// # Grants
//
// A run's grant lives only in Go, bound to the worker and the execution id;
// every system.* call a script makes is checked against it with the scope
// table (ScopeFor) before the Services see it. Nothing a worker writes on
// its pipe can name or widen the grant (DESIGN.md, "Levels, realms, scopes,
// grants"; SANDBOX.md §2.3).
//
// # Guardrail, not boundary
//
// The Python restrictions (sandbox/python/qubiq_guard.py) stop an ordinary
// script from reaching files, network or processes by accident and keep one
// run from changing what the next sees. They are not a security boundary:
// the boundary is who may author a script, the scope and write-level checks
// on the Go side, and the OS limits (cgroups, rlimits, process-group kill).
//
// # Imports
//
// sandbox imports auth, value and its own sub-packages; it must not import
// api, mqtt, store, device or tagengine (deps_test.go). The daemon passes the
// concrete Services.
package sandbox
