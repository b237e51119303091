package packages

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// pipEnv is the environment of pip, built from nothing:
// no configuration file, no inherited PIP_* variable, no proxy, no prompt.
func (pm *Manager) pipEnv(tmp string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"HOME=" + filepath.Join(pm.opts.DataDir, "run", "sandbox", "pip-home"),
		"TMPDIR=" + tmp,
		"PIP_CONFIG_FILE=/dev/null",
		"PIP_NO_INPUT=1",
		"PIP_DISABLE_PIP_VERSION_CHECK=1",
		"PYTHONDONTWRITEBYTECODE=",
	}
}

// pip runs `python -I -m pip args...` (the runtime's own pip, never inside
// a worker), streaming each line of its output to progress, and returns
// the last lines of its output. Its errors wrap ErrPip.
func (pm *Manager) pip(ctx context.Context, tmp string, progress func(Progress), args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, pipTimeout)
	defer cancel()
	if err := os.MkdirAll(filepath.Join(pm.opts.DataDir, "run", "sandbox", "pip-home"), 0o700); err != nil {
		return "", fmt.Errorf("sandbox: pip: %w", err)
	}
	cmd := exec.CommandContext(cctx, pm.python, append([]string{"-I", "-m", "pip"}, args...)...)
	cmd.Env = pm.pipEnv(tmp)
	cmd.Dir = tmp
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("sandbox: pip: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return "", fmt.Errorf("sandbox: pip: start %s: %w", pm.python, err)
	}
	pw.Close()
	out := &tailBuf{}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		out.Write([]byte(line + "\n"))
		if strings.TrimSpace(line) != "" && progress != nil {
			progress(Progress{Step: "pip", Message: line})
		}
	}
	pr.Close()
	err = cmd.Wait()
	text := out.String()
	switch {
	case cctx.Err() != nil && ctx.Err() == nil:
		return text, fmt.Errorf("%w: pip did not finish within %v", ErrPip, pipTimeout)
	case ctx.Err() != nil:
		return text, fmt.Errorf("%w: %v", ErrPip, ctx.Err())
	case err != nil:
		if strings.Contains(text, "No module named pip") {
			return text, fmt.Errorf("%w (%s): %s", ErrNoPip, pm.python, lastLine(text))
		}
		return text, fmt.Errorf("%w: %s", ErrPip, pipReason(text))
	}
	return text, nil
}

var noMatchRe = regexp.MustCompile(`No matching distribution found for (\S+)`)

// pipReason is the useful part of pip's output on failure.
func pipReason(out string) string {
	if m := noMatchRe.FindStringSubmatch(out); m != nil {
		return fmt.Sprintf("no wheel found for %s (every dependency must be available as a wheel for this runtime: "+
			"upload it with the others, or check python.index_url)", m[1])
	}
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "ERROR:") {
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	if len(errs) > 0 {
		return tail(strings.Join(errs, " "), 600)
	}
	return lastLine(out)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}

// pipReport is the part of pip's installation report (--report, format 1)
// the preflight reads.
type pipReport struct {
	Install []struct {
		Requested bool `json:"requested"`
		Metadata  struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
		DownloadInfo struct {
			URL string `json:"url"`
		} `json:"download_info"`
	} `json:"install"`
}

// tailBuf keeps the last bytes pip wrote.
type tailBuf struct {
	buf []byte
}

const tailMax = 8 << 10

func (t *tailBuf) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuf) String() string { return strings.TrimSpace(string(t.buf)) }

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
