package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxSource is the largest module Check accepts, in bytes.
const maxSource = 1 << 20

// checkTimeout bounds one Check.
const checkTimeout = 30 * time.Second

// Check compiles module's code in a short-lived isolated interpreter (it is
// never run) and returns its entries and diagnostics (README: Scripting
// API and data). Entries are the top-level functions whose names do
// not begin with "_" and that take one positional argument; each one's
// timeout is @gateway(timeout_ms=N) clamped to python.gateway_timeout, or
// its default.
//
// When a diagnostic is an error — a syntax error (with line and column), an
// attribute name beginning with "_" or a frame/code attribute, a name
// beginning with "__" (parameters included), an import whose root is not on
// the allow-list (the message names the allow-list), a malformed @gateway —
// Check returns the ModuleInfo with every diagnostic and a *RunError of kind
// invalid naming the first; the module must not be saved. Without a runtime
// the error is kind runtime_missing.
func (p *Pool) Check(ctx context.Context, module, code string) (ModuleInfo, error) {
	p.awaitWarm(ctx, p.startTimeout, false)
	if err := p.runtimeErr(); err != nil {
		return ModuleInfo{}, err
	}
	if module == "" || strings.ContainsAny(module, "/\\\x00 ") || strings.HasPrefix(module, "_") {
		return ModuleInfo{}, runErr(KindInvalid, "invalid module name %q", module)
	}
	if len(code) > maxSource {
		return ModuleInfo{}, runErr(KindInvalid, "module %s is %d bytes; the limit is %d", module, len(code), maxSource)
	}
	_, installed := p.pkgs.Current()
	req, err := json.Marshal(map[string]any{
		"module": module, "source": code, "allowed": p.allowed, "installed": installed,
	})
	if err != nil {
		return ModuleInfo{}, fmt.Errorf("sandbox: check %s: %w", module, err)
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, p.python, "-I", "-S", p.codeDir+"/"+checkScript, p.codeDir)
	cmd.Env = childEnv(p.homeDir)
	cmd.Dir = p.homeDir
	cmd.Stdin = bytes.NewReader(req)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil {
			return ModuleInfo{}, runErr(KindTimeout, "checking module %s did not finish: %v", module, cctx.Err())
		}
		return ModuleInfo{}, runErr(KindKilled, "the checker failed on module %s: %v: %s", module, err,
			tail(errOut.String(), 600))
	}
	var res struct {
		Entries []struct {
			Name      string `json:"name"`
			TimeoutMs *int   `json:"timeout_ms"`
		} `json:"entries"`
		Diagnostics []Diagnostic `json:"diagnostics"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return ModuleInfo{}, runErr(KindKilled, "the checker's answer on module %s is not JSON: %v", module, err)
	}
	info := ModuleInfo{Entries: []Entry{}, Diagnostics: res.Diagnostics}
	if info.Diagnostics == nil {
		info.Diagnostics = []Diagnostic{}
	}
	for _, e := range res.Entries {
		ms := 0
		if e.TimeoutMs != nil {
			ms = *e.TimeoutMs
		}
		got := int(p.cfg.clampTimeout(ms) / time.Millisecond)
		if e.TimeoutMs != nil && got != ms {
			// Clamping is not silent: the author sees the timeout that applies.
			info.Diagnostics = append(info.Diagnostics, Diagnostic{Line: 1, Column: 1, EndLine: 1, EndColumn: 1,
				Code: "QB-timeout", Severity: "warning",
				Message: fmt.Sprintf("%s: @gateway(timeout_ms=%d) is outside python.gateway_timeout [%s, %s]; %s applies",
					e.Name, ms, p.cfg.GatewayTimeout.Min, p.cfg.GatewayTimeout.Max, time.Duration(got)*time.Millisecond)})
		}
		info.Entries = append(info.Entries, Entry{Name: e.Name, TimeoutMs: got})
	}
	var first *Diagnostic
	n := 0
	for i := range info.Diagnostics {
		if info.Diagnostics[i].Severity == "error" {
			if first == nil {
				first = &info.Diagnostics[i]
			}
			n++
		}
	}
	if first != nil {
		detail := fmt.Sprintf("module %s refused: %s (line %d, column %d)", module, first.Message, first.Line, first.Column)
		if n > 1 {
			detail += fmt.Sprintf(" and %d more problems", n-1)
		}
		return info, &RunError{Kind: KindInvalid, Detail: detail, Line: first.Line}
	}
	return info, nil
}
