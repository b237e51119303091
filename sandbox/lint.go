package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The linters of docs/api.md (REST, POST /scripts/lint; health "linter").
const (
	LinterRuff       = "ruff"
	LinterSyntaxOnly = "syntax-only"
)

// lintTimeout bounds one ruff run.
const lintTimeout = 20 * time.Second

// findRuff returns the ruff executable the linter uses: ruff in the
// runtime's bin/ (the directory of python.path as configured, then of the
// resolved interpreter), else ruff on the daemon's PATH; "" when there is
// none (docs/scripting.md, "Python side": "Linting uses ruff when found (the
// runtime's bin/, then PATH)").
func findRuff(configured, resolved string) string {
	for _, py := range []string{configured, resolved} {
		if py == "" {
			continue
		}
		c := filepath.Join(filepath.Dir(py), "ruff")
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return c
		}
	}
	if c, err := exec.LookPath("ruff"); err == nil {
		if abs, err := filepath.Abs(c); err == nil {
			return abs
		}
		return c
	}
	return ""
}

// Lint lints code (a whole module) and returns which linter ran and its
// diagnostics, sorted by position, in the one shape of docs/api.md, POST /scripts/lint (1-based
// line and character column, code, message, severity "error" or
// "warning").
//
// With ruff (Linter... "ruff") the diagnostics are ruff's (`ruff check
// --output-format json --stdin-filename script.py -`, rules E4, E7, E9, F
// and B; syntax errors get the code "syntax-error" whatever ruff version
// reports them; undefined names other than the builtins system and gateway
// are errors, the rest warnings) plus the guardrail's findings (forbidden
// names, attributes and imports) from the save-time check. Without ruff the
// linter is "syntax-only": compile() in a short-lived isolated interpreter
// (never a worker) and the same guardrail findings, exactly what saving
// refuses. Diagnostics are not an error: err is a *RunError only when no
// linter could run (kind runtime_missing without ruff and without a
// runtime; kind killed or timeout when the linter failed).
func (p *Pool) Lint(ctx context.Context, code string) (linter string, diags []Diagnostic, err error) {
	if len(code) > maxSource {
		return "", nil, runErr(KindInvalid, "the code is %d bytes; the limit is %d", len(code), maxSource)
	}
	p.awaitWarm(ctx, p.startTimeout, false) // the linter and the guardrail as they will be
	p.mu.RLock()
	ruff := p.ruff
	p.mu.RUnlock()
	if ruff == "" {
		info, err := p.Check(ctx, "script", code)
		if err != nil && KindOf(err) != KindInvalid {
			return LinterSyntaxOnly, nil, err
		}
		return LinterSyntaxOnly, nonNilDiags(info.Diagnostics), nil
	}
	diags, err = p.runRuff(ctx, ruff, code)
	if err != nil {
		return LinterRuff, nil, err
	}
	// The guardrail's findings, when a runtime is there to check: they are
	// what saving refuses. Ruff reported the syntax errors already.
	if p.runtimeErr() == nil {
		info, cerr := p.Check(ctx, "script", code)
		if cerr != nil && KindOf(cerr) != KindInvalid {
			return LinterRuff, nil, cerr
		}
		for _, d := range info.Diagnostics {
			if d.Code != "syntax-error" {
				diags = append(diags, d)
			}
		}
	}
	sort.SliceStable(diags, func(i, j int) bool {
		if diags[i].Line != diags[j].Line {
			return diags[i].Line < diags[j].Line
		}
		return diags[i].Column < diags[j].Column
	})
	return LinterRuff, nonNilDiags(diags), nil
}

func nonNilDiags(d []Diagnostic) []Diagnostic {
	if d == nil {
		return []Diagnostic{}
	}
	return d
}

// runRuff runs ruff on code from stdin in an empty directory, with an
// environment built from nothing and no configuration file (--isolated).
func (p *Pool) runRuff(ctx context.Context, ruff, code string) ([]Diagnostic, error) {
	dir, err := os.MkdirTemp(p.homeDir, "lint-")
	if err != nil {
		if err := os.MkdirAll(p.homeDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: lint: %w", err)
		}
		if dir, err = os.MkdirTemp(p.homeDir, "lint-"); err != nil {
			return nil, fmt.Errorf("sandbox: lint: %w", err)
		}
	}
	defer os.RemoveAll(dir)
	cctx, cancel := context.WithTimeout(ctx, lintTimeout)
	defer cancel()
	args := []string{"check", "--output-format", "json", "--no-cache", "--isolated", "--exit-zero",
		"--select", "E4,E7,E9,F,B", "--stdin-filename", "script.py", "-"}
	cmd := exec.CommandContext(cctx, ruff, args...)
	cmd.Env = childEnv(dir)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(code)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	runErrV := cmd.Run()
	if cctx.Err() != nil {
		return nil, runErr(KindTimeout, "ruff did not finish within %v", lintTimeout)
	}
	// Exit 0: no findings; 1: findings (without --exit-zero); 2: ruff failed.
	if runErrV != nil {
		var ee *exec.ExitError
		if !errors.As(runErrV, &ee) || ee.ExitCode() != 1 {
			return nil, runErr(KindKilled, "ruff failed: %v: %s", runErrV, tail(strings.TrimSpace(errOut.String()), 600))
		}
	}
	diags, err := parseRuff(out.Bytes())
	if err != nil {
		return nil, runErr(KindKilled, "ruff's answer is not its JSON output: %v: %s", err, tail(out.String(), 300))
	}
	return diags, nil
}

// ruffItem is one element of `ruff check --output-format json` (ruff
// 0.1 to 0.13 and later; docs/security.md, "The script sandbox").
type ruffItem struct {
	Code     *string `json:"code"`
	Message  string  `json:"message"`
	Location struct {
		Row    int `json:"row"`
		Column int `json:"column"`
	} `json:"location"`
	EndLocation *struct {
		Row    int `json:"row"`
		Column int `json:"column"`
	} `json:"end_location"`
}

// builtinNames are the names every script has without importing them;
// ruff does not know them.
var builtinNames = []string{"system", "gateway"}

// parseRuff converts ruff's JSON into Diagnostics. A syntax error, which
// ruff reports with code null (0.5–0.13), "invalid-syntax" (later) or E999
// (before 0.5), gets the code "syntax-error", as the syntax-only linter
// gives it; F821–F823 (undefined names) are errors, except for the
// builtins system and gateway, which are dropped; everything else is a
// warning.
func parseRuff(b []byte) ([]Diagnostic, error) {
	var items []ruffItem
	if err := json.Unmarshal(bytes.TrimSpace(b), &items); err != nil {
		return nil, err
	}
	out := make([]Diagnostic, 0, len(items))
	for _, it := range items {
		code := ""
		if it.Code != nil {
			code = *it.Code
		}
		d := Diagnostic{Line: max(it.Location.Row, 1), Column: max(it.Location.Column, 1), Message: it.Message,
			Code: code, Severity: "warning"}
		d.EndLine, d.EndColumn = d.Line, d.Column
		if e := it.EndLocation; e != nil && (e.Row > d.Line || (e.Row == d.Line && e.Column >= d.Column)) {
			d.EndLine, d.EndColumn = e.Row, e.Column
		}
		switch {
		case code == "" || code == "invalid-syntax" || code == "E999" || strings.HasPrefix(it.Message, "SyntaxError"):
			d.Code = "syntax-error"
			d.Severity = "error"
			if !strings.HasPrefix(d.Message, "SyntaxError") {
				d.Message = "SyntaxError: " + d.Message
			}
		case code == "F821" || code == "F822" || code == "F823":
			if undefinedBuiltin(it.Message) {
				continue
			}
			d.Severity = "error"
		}
		out = append(out, d)
	}
	return out, nil
}

// undefinedBuiltin reports whether ruff's undefined-name message is about
// one of builtinNames ("Undefined name `system`").
func undefinedBuiltin(msg string) bool {
	for _, n := range builtinNames {
		if strings.Contains(msg, "`"+n+"`") || strings.Contains(msg, "'"+n+"'") {
			return true
		}
	}
	return false
}
