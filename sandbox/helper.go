package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// helperArg is the subcommand of the daemon binary that confines itself and
// then executes Python (docs/security.md, "The script sandbox").
const helperArg = "sandbox-exec"

// helperReady is set by MaybeRunHelper: the running binary handles
// sandbox-exec, so the pool may start workers through it.
var helperReady atomic.Bool

// MaybeRunHelper must be the first call in the main of every binary that
// runs a Pool (cmd/qubiqd; TestMain in tests). When os.Args[1] is
// "sandbox-exec" the process is the worker helper: it joins the worker's
// cgroups, sets its rlimits, enters a private network namespace, sets
// no_new_privs, applies Landlock, and executes the interpreter; it never
// returns (it exits 126 when a step fails, saying which on stderr).
// Otherwise it records that the helper is available and returns.
//
//	<daemon> sandbox-exec [--join FILE]... [--rlimit NAME=VALUE]... [--netns] [--nnp]
//	    [--landlock-x FILE]... [--landlock-ro DIR]... [--landlock-rof FILE]... [--landlock-rw DIR]... [--landlock]
//	    -- PYTHON ARGS...
//	<daemon> sandbox-exec --probe [--nnp] [--netns] [--landlock-probe]
//
// NAME is as (RLIMIT_AS, bytes), core, cpu (seconds), fsize (bytes), nofile
// or nproc. The --landlock-* options collect rules (execute+read on files,
// read on directories, read on files, read+write on directories) that
// --landlock enforces right before execve, on the thread that calls it
// (Landlock domains, no_new_privs and network namespaces are per thread and
// survive execve). --probe applies the named layers to itself and prints
// which worked as JSON ({"nnp","netns","landlock","landlock_abi"}, an empty
// string for a layer that worked). A Pool started in a binary that did not
// call MaybeRunHelper runs without the helper: no cgroup v1 confinement, no
// rlimits and no hardening (Health says so, and a limit or a layer set "on"
// that then cannot be applied fails the worker start).
func MaybeRunHelper() {
	helperReady.Store(true)
	if len(os.Args) < 2 || os.Args[1] != helperArg {
		return
	}
	if len(os.Args) > 2 && os.Args[2] == "--probe" {
		runtime.LockOSThread()
		b, _ := json.Marshal(probe(os.Args[3:]))
		os.Stdout.Write(append(b, '\n'))
		os.Exit(0)
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
	// no_new_privs, the network namespace and the Landlock domain are per
	// thread: set them all on the thread that calls execve.
	runtime.LockOSThread()
	var argv []string
	var ll llRules
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
			// exists: it never runs outside its cgroup (docs/security.md, "The script sandbox").
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
		case "--netns":
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			}
		case "--landlock-x", "--landlock-ro", "--landlock-rof", "--landlock-rw":
			p, err := next()
			if err != nil {
				return err
			}
			ll.add(a, p)
		case "--landlock":
			ll.enforce = true
		default:
			return fmt.Errorf("unknown option %q", a)
		}
	}
	if len(argv) == 0 {
		return errors.New("no command after --")
	}
	// A helper started in a user namespace of its own (userNSFor) holds
	// CAP_SYS_ADMIN there as an ambient capability, for the network
	// namespace only: the interpreter must not inherit it.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	if ll.enforce {
		// Last: from here on the process can only execute the interpreter.
		if err := ll.restrict(); err != nil {
			return err
		}
	}
	// Only stdin/stdout/stderr and the transport (fds 3 and 4) reach
	// Python: descriptors the daemon itself inherited without close-on-exec
	// (from a shell, a supervisor) are closed by the exec.
	if err := unix.CloseRange(5, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("close_range: %w", err)
	}
	return fmt.Errorf("exec %s: %w", argv[0], syscall.Exec(argv[0], argv, os.Environ()))
}

// probe applies each layer named in args to this process and reports which
// worked; see MaybeRunHelper.
func probe(args []string) probeResult {
	var r probeResult
	if abi, err := llsys.LandlockGetABIVersion(); err == nil {
		r.LandlockABI = abi
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, a := range args {
		switch a {
		case "--nnp":
			r.NNP = errText(unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		case "--netns":
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				r.NetNS = fmt.Sprintf("unshare(CLONE_NEWNET): %v (needs CAP_SYS_ADMIN)", err)
			}
		case "--landlock-probe":
			switch {
			case r.LandlockABI < 1:
				r.Landlock = "the kernel has no Landlock (not built in, or not in the lsm= boot list)"
			default:
				var ll llRules
				ll.add("--landlock-ro", "/")
				r.Landlock = errText(ll.restrict())
			}
		}
	}
	return r
}
