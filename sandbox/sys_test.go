package sandbox

import "syscall"

func setpgid() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
