package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"qubiq.dev/edge/internal/suggest"
)

// maxSource is the largest module Check accepts, in bytes.
const maxSource = 1 << 20

// checkTimeout bounds one Check.
const checkTimeout = 30 * time.Second

// knownDecorators are the decorators a script has without an import
// (docs/scripting.md, "Modules, versions and entries").
var knownDecorators = []string{"gateway"}

// knownDecoratorNear returns the known decorator one edit away from name
// (a typo such as gatway), or "" when there is none or name is known.
func knownDecoratorNear(name string) string {
	for _, k := range knownDecorators {
		if suggest.Distance(name, k) == 1 {
			return k
		}
	}
	return ""
}

// place is where a finding is in the module, as the checker reports it.
type place struct {
	Line      int `json:"line"`
	Column    int `json:"column"`
	EndLine   int `json:"end_line"`
	EndColumn int `json:"end_column"`
}

func (at place) diag(code, severity, msg string) Diagnostic {
	return Diagnostic{Line: at.Line, Column: at.Column, EndLine: at.EndLine, EndColumn: at.EndColumn,
		Code: code, Severity: severity, Message: msg}
}

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
// the allow-list (the message names the allow-list), a malformed @gateway,
// a decorator one edit away from a known one (@gatway: did you mean
// @gateway?) —
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
			Line      int    `json:"line"`
			GatewayAt *place `json:"gateway_at"`
		} `json:"entries"`
		Diagnostics []Diagnostic `json:"diagnostics"`
		Decorators  []struct {
			Name string `json:"name"`
			place
		} `json:"decorators"`
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
			// Clamping is not silent: the author sees the timeout that
			// applies, at the @gateway that asked for another.
			at := place{Line: e.Line, Column: 1, EndLine: e.Line, EndColumn: 1}
			if e.GatewayAt != nil {
				at = *e.GatewayAt
			}
			info.Diagnostics = append(info.Diagnostics, at.diag("QB-timeout", "warning",
				fmt.Sprintf("%s: @gateway(timeout_ms=%d) is outside python.gateway_timeout [%s, %s]; %s applies",
					e.Name, ms, p.cfg.GatewayTimeout.Min, p.cfg.GatewayTimeout.Max, time.Duration(got)*time.Millisecond)))
		}
		info.Entries = append(info.Entries, Entry{Name: e.Name, TimeoutMs: got})
	}
	for _, d := range res.Decorators {
		if known := knownDecoratorNear(d.Name); known != "" {
			info.Diagnostics = append(info.Diagnostics, d.diag("unknown-decorator", "error",
				fmt.Sprintf("unknown decorator @%s: did you mean @%s? (as written, every run fails with NameError)", d.Name, known)))
		}
	}
	sort.SliceStable(info.Diagnostics, func(i, j int) bool {
		a, b := info.Diagnostics[i], info.Diagnostics[j]
		return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
	})
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
