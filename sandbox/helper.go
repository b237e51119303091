package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// helperArg is the subcommand of the daemon binary that confines itself and
// then executes Python (SANDBOX.md §2.1).
const helperArg = "sandbox-exec"

// helperReady is set by MaybeRunHelper: the running binary handles
// sandbox-exec, so the pool may start workers through it.
var helperReady atomic.Bool

// MaybeRunHelper must be the first call in the main of every binary that
// runs a Pool (cmd/qubiqd; TestMain in tests). When os.Args[1] is
// "sandbox-exec" the process is the worker helper: it joins the worker's
// cgroups, sets its rlimits and no_new_privs, and executes the interpreter;
// it never returns (it exits 126 when a step fails, saying which on stderr).
// Otherwise it records that the helper is available and returns.
//
//	<daemon> sandbox-exec [--join FILE]... [--rlimit NAME=VALUE]... [--nnp] -- PYTHON ARGS...
//
// NAME is as (RLIMIT_AS, bytes), core, cpu (seconds), fsize (bytes), nofile
// or nproc. A Pool started in a binary that did not call MaybeRunHelper runs
// without the helper: no cgroup v1 confinement and no rlimits (Health says
// so, and a limit that then cannot be applied fails the worker start).
func MaybeRunHelper() {
	helperReady.Store(true)
	if len(os.Args) < 2 || os.Args[1] != helperArg {
		return
	}
	err := runHelper(os.Args[2:])
	fmt.Fprintf(os.Stderr, "qubiq sandbox-exec: %v\n", err)
	os.Exit(126)
}

var rlimitNames = map[string]int{
	"as":     unix.RLIMIT_AS,
	"core":   unix.RLIMIT_CORE,
	"cpu":    unix.RLIMIT_CPU,
	"fsize":  unix.RLIMIT_FSIZE,
	"nofile": unix.RLIMIT_NOFILE,
	"nproc":  unix.RLIMIT_NPROC,
}

// runHelper confines the process and executes argv; it returns only on error.
func runHelper(args []string) error {
	// no_new_privs is per thread: set it on the thread that calls execve.
	runtime.LockOSThread()
	var argv []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch a {
		case "--":
			argv = args[i+1:]
			i = len(args)
		case "--join":
			f, err := next()
			if err != nil {
				return err
			}
			// Writing our pid moves the whole thread group before Python
			// exists: it never runs outside its cgroup (SANDBOX.md §1.3).
			if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				return fmt.Errorf("join cgroup %s: %w", f, err)
			}
		case "--rlimit":
			v, err := next()
			if err != nil {
				return err
			}
			name, val, ok := strings.Cut(v, "=")
			res, known := rlimitNames[name]
			n, perr := strconv.ParseUint(val, 10, 64)
			if !ok || !known || perr != nil {
				return fmt.Errorf("bad --rlimit %q", v)
			}
			if err := unix.Setrlimit(res, &unix.Rlimit{Cur: n, Max: n}); err != nil {
				return fmt.Errorf("setrlimit %s=%d: %w", name, n, err)
			}
		case "--nnp":
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
			}
		default:
			return fmt.Errorf("unknown option %q", a)
		}
	}
	if len(argv) == 0 {
		return errors.New("no command after --")
	}
	return fmt.Errorf("exec %s: %w", argv[0], syscall.Exec(argv[0], argv, os.Environ()))
}
