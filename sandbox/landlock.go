package sandbox

import (
	"errors"
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock access sets of the worker's rules (docs/security.md, "The script sandbox"). Directory
// rights on a file are refused by the kernel ("inconsistent access
// rights"), so files and directories get separate sets.
const (
	llExecFile = landlock.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSReadFile)
	llReadFile = landlock.AccessFSSet(llsys.AccessFSReadFile)
	llReadDir  = landlock.AccessFSSet(llsys.AccessFSReadFile | llsys.AccessFSReadDir)
	llWriteDir = llReadDir | landlock.AccessFSSet(llsys.AccessFSWriteFile|llsys.AccessFSRemoveDir|
		llsys.AccessFSRemoveFile|llsys.AccessFSMakeDir|llsys.AccessFSMakeReg|llsys.AccessFSTruncate)
)

// llRules collects the helper's --landlock-* options.
type llRules struct {
	exec, ro, roF, rw []string
	enforce           bool
}

func (l *llRules) add(opt, path string) {
	switch opt {
	case "--landlock-x":
		l.exec = append(l.exec, path)
	case "--landlock-ro":
		l.ro = append(l.ro, path)
	case "--landlock-rof":
		l.roF = append(l.roF, path)
	case "--landlock-rw":
		l.rw = append(l.rw, path)
	}
}

// restrict enforces the rules on the calling thread (the one that calls
// execve next), handling every right of the newest ABI this kernel and
// go-landlock share: what no rule grants is denied, including execute
// outside the --landlock-x files, TCP bind and connect (ABI ≥ 4), and
// abstract UNIX sockets and signals to processes outside the domain
// (ABI ≥ 6). It needs no_new_privs or CAP_SYS_ADMIN.
func (l *llRules) restrict() error {
	var rules []landlock.Rule
	if len(l.exec) > 0 {
		rules = append(rules, landlock.PathAccess(llExecFile, l.exec...))
	}
	if len(l.ro) > 0 {
		rules = append(rules, landlock.PathAccess(llReadDir, l.ro...))
	}
	if len(l.roF) > 0 {
		rules = append(rules, landlock.PathAccess(llReadFile, l.roF...))
	}
	if len(l.rw) > 0 {
		rules = append(rules, landlock.PathAccess(llWriteDir, l.rw...))
	}
	fd, flags, err := landlock.V11.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("landlock: the kernel supports nothing to restrict")
	}
	defer unix.Close(fd)
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("landlock_restrict_self: %w (needs no_new_privs or CAP_SYS_ADMIN)", err)
		}
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
