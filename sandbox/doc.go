// Package sandbox runs user Python scripts for QUBIQ Edge in a pool of
// pre-started worker processes (README: The script sandbox is a guardrail,
// not a security boundary; Scripting API and data).
//
// It owns the worker pool, the transport (sandbox/rpc), the cgroup limits
// (sandbox/cgroup), the OS hardening of the workers, the scope table of the
// system.* methods and their dispatcher (the wire forms are in
// METHODS.md), the save-time check and the linter, the package installs,
// and the worker's Python side (sandbox/python, embedded and written to
// <data_dir>/run/sandbox at every start).
//
// # Life cycle
//
//  1. New(cfg, svc, logger) validates the config.
//  2. Start(ctx) resolves the interpreter once (symlinks followed; a pyenv
//     shim or other script is asked for sys.executable once), finds the
//     linter, writes the Python files, prepares python-packages, detects
//     the isolation mode and the hardening layers, and starts cfg.Replicas
//     workers. When the interpreter is missing or fails its handshake,
//     Start returns nil and the pool is degraded: Health says why and every
//     Run and Check fails with kind runtime_missing. There is no fall back
//     to another Python.
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
// its pipe can name or widen the grant (rpc.Call carries no grant).
//
// # Guardrail, not boundary
//
// The Python restrictions (sandbox/python/qubiq_guard.py) stop an ordinary
// script from reaching files, network or processes by accident and keep one
// run from changing what the next sees. They are not a security boundary:
// the boundary is who may author a script, the scope and write-level checks
// on the Go side, and the OS layers below.
//
// # OS layers
//
// Limits: cgroup v2 or v1 memory, pids and cpu, else rlimits (Health says
// which, and what it cannot enforce: in rlimit mode the number of processes
// is not limited, RLIMIT_NPROC does not bind root). Hardening
// (python.hardening, each auto|on|off, applied by the sandbox-exec helper
// on the thread that executes Python, each reported active, disabled or
// unavailable with the reason):
//
//   - no_new_privs: no privilege gain through execve.
//   - netns: a private network namespace with only a downed loopback: a
//     worker cannot reach any address, even when a script gets hold of the
//     socket module (installed packages may import it).
//   - landlock: the filesystem is cut to the runtime, the worker code and
//     python-packages (read only) and the worker's private home (its temp
//     dir, read and write); only the interpreter and its ELF interpreter may
//     be executed; TCP bind and connect are denied (Landlock ABI ≥ 4), and
//     abstract UNIX sockets and signals are scoped (ABI ≥ 6).
//
// Known gap, closed by Landlock: on CPython 3.11, _posixsubprocess.fork_exec
// raises no audit event (python/cpython#115322, fixed in later CPython), so
// a script that reaches sys.modules can fork and exec a program past the
// audit hook. With Landlock active the fork happens but the exec of anything
// but the interpreter fails (EACCES), and no file outside the worker's home
// can be written. Other gaps of the audit hook that the OS layers cover: raw
// os.write on inherited descriptors (the protocol binds each call to its
// execution and grant), ctypes and C extensions (no audit events; the
// package warnings say which packages bring them).
//
// # Packages
//
// Administrators install wheels into <data_dir>/python-packages, on the
// workers' module path; the package manager is its own package,
// sandbox/packages (generations switched in one rename, a wheelhouse so
// removals need no network, acknowledgement of what each package widens).
// The pool owns one (PackageManager): after a switch it restarts the
// workers one at a time, and the installed packages' top-level import
// names join the allow-list.
//
// # Lint
//
// Lint uses ruff when it finds one (the runtime's bin/, then PATH), else
// the syntax-only check (compile() in a short-lived isolated interpreter);
// both give the REST lint's diagnostic shape, with the guardrail's findings.
//
// # Imports
//
// sandbox imports auth, value and its own sub-packages; it must not import
// api, mqtt, store, device, tagengine or the service layer (deps_test.go).
// The service layer (gateway/service) is the concrete Services: it
// implements each row of the method table.
package sandbox
