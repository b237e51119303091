package sandbox

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// pythonFiles is the worker's Python side (sandbox/python), written to the
// code directory at every Start.
//
//go:embed python/*.py
var pythonFiles embed.FS

// Names of the embedded files the daemon runs.
const (
	workerScript = "qubiq_worker.py"
	checkScript  = "qubiq_check.py"
)

// writePythonFiles replaces dir with the embedded Python files (directory
// 0700, files 0600).
func writePythonFiles(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox: create %s: %w", dir, err)
	}
	return fs.WalkDir(pythonFiles, "python", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := pythonFiles.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			return fmt.Errorf("sandbox: write %s: %w", dst, err)
		}
		return nil
	})
}

// errNoRuntime marks an interpreter that is absent or unusable.
var errNoRuntime = errors.New("the Python runtime is missing")

// resolvePython returns the real interpreter named by path, resolved once:
// symlinks are followed; when the result is a script (a pyenv shim, a
// wrapper), the script is asked for sys.executable once and that is resolved
// in turn. The result must be an ELF executable. Errors wrap errNoRuntime.
func resolvePython(ctx context.Context, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errNoRuntime, path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errNoRuntime, path, err)
	}
	kind, err := executableKind(real)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errNoRuntime, path, err)
	}
	if kind == "elf" {
		return real, nil
	}
	// A script: ask it once which interpreter it runs. It gets the daemon's
	// environment (a pyenv shim needs PYENV_ROOT and HOME); workers never do.
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, real, "-c", "import sys;print(sys.executable)")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s is a script and asking it for sys.executable failed: %v: %s",
			errNoRuntime, real, err, strings.TrimSpace(tail(errOut.String(), 300)))
	}
	exe := strings.TrimSpace(out.String())
	if exe == "" || !filepath.IsAbs(exe) {
		return "", fmt.Errorf("%w: %s is a script that named no interpreter (%q)", errNoRuntime, real, exe)
	}
	real2, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("%w: %s (named by %s): %v", errNoRuntime, exe, real, err)
	}
	if k, err := executableKind(real2); err != nil || k != "elf" {
		return "", fmt.Errorf("%w: %s (named by %s) is not an executable binary", errNoRuntime, real2, real)
	}
	return real2, nil
}

// executableKind returns "elf" or "script" for an executable regular file.
func executableKind(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", errors.New("not an executable file")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var head [4]byte
	n, _ := f.Read(head[:])
	switch {
	case n == 4 && string(head[:]) == "\x7fELF":
		return "elf", nil
	case n >= 2 && string(head[:2]) == "#!":
		return "script", nil
	}
	return "", errors.New("neither an ELF binary nor a script")
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// childEnv is the whole environment of a worker and of the checker, built
// from nothing: nothing of the daemon's environment (no NOTIFY_SOCKET, no
// WATCHDOG_*, no PYTHON*, no proxies) reaches a script.
func childEnv(home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"HOME=" + home,
		"TMPDIR=" + home,
		"OMP_NUM_THREADS=1",
		"OPENBLAS_NUM_THREADS=1",
		"MKL_NUM_THREADS=1",
		"NUMEXPR_NUM_THREADS=1",
		"VECLIB_MAXIMUM_THREADS=1",
	}
}
