package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
)

// Scripts is the script store and the sandbox pool together: what the API
// calls to save, list, lint and run gateway scripts, and the services
// (system.tag.*) the sandbox dispatcher calls back into.
type Scripts struct {
	s    *System
	pool *sandbox.Pool
}

var moduleRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

func newScripts(_ context.Context, s *System) (*Scripts, error) {
	py := s.Config.Python
	cfg := sandbox.DefaultConfig()
	cfg.PythonPath = py.Path
	cfg.Replicas = py.Replicas
	cfg.DataDir = s.Config.DataDir
	if py.GatewayTimeout.Default > 0 {
		cfg.GatewayTimeout.Default = py.GatewayTimeout.Default.D()
	}
	if py.GatewayTimeout.Min > 0 {
		cfg.GatewayTimeout.Min = py.GatewayTimeout.Min.D()
	}
	if py.GatewayTimeout.Max > 0 {
		cfg.GatewayTimeout.Max = py.GatewayTimeout.Max.D()
	}
	if py.NodeTimeout > 0 {
		cfg.NodeTimeout = py.NodeTimeout.D()
	}
	cfg.MemoryMax = int64(py.MemoryMax)
	cfg.PidsMax = py.PidsMax
	cfg.CPUMax = py.CPUMax
	if py.RecycleAfterRuns > 0 {
		cfg.RecycleAfterRuns = py.RecycleAfterRuns
	}
	if py.RecycleAboveMemory > 0 {
		cfg.RecycleAboveMemory = int64(py.RecycleAboveMemory)
	}
	if py.Queue > 0 {
		cfg.Queue = py.Queue
	}
	cfg.IndexURL, cfg.Hardening = py.IndexURL, sandbox.HardeningFrom(py.Hardening) // python.index_url, python.hardening
	sc := &Scripts{s: s}
	pool, err := sandbox.New(cfg, services{s}, s.Log.With("subsystem", "sandbox"))
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	sc.pool = pool
	return sc, nil
}

// start starts the workers, then registers the stored modules and the
// project's script files (a file whose code differs from the stored latest
// version is saved as a new version).
func (sc *Scripts) start(ctx context.Context) error {
	if err := sc.pool.Start(ctx); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	stored, err := sc.s.DB.Scripts()
	if err != nil {
		return err
	}
	latest := map[string]store.Script{}
	for _, st := range stored {
		latest[st.Module] = st
		var info sandbox.ModuleInfo
		if err := json.Unmarshal(st.Meta, &info); err != nil {
			sc.s.Log.Error("stored script metadata unreadable", slog.String("module", st.Module), slog.Any("err", err))
			continue
		}
		sc.pool.SetModule(st.Module, st.Code, info, st.Version)
	}
	for _, ps := range sc.s.Project().Scripts {
		code, err := os.ReadFile(sc.s.Project().ScriptFile(ps))
		if err != nil {
			return fmt.Errorf("project script %q: %w", ps.Module, err)
		}
		if st, ok := latest[ps.Module]; ok && st.Code == string(code) {
			continue
		}
		if _, err := sc.save(ctx, auth.Full("project", auth.RealmPlatform, "project"), ps.Module, string(code)); err != nil {
			sc.s.Log.Error("project script not loaded", slog.String("module", ps.Module), slog.Any("err", err))
		}
	}
	return nil
}

func (sc *Scripts) close(ctx context.Context) {
	if err := sc.pool.Close(ctx); err != nil {
		sc.s.Log.Error("stop sandbox", slog.Any("err", err))
	}
}

func (sc *Scripts) health() (apitypes.SandboxHealth, []string) {
	h := sc.pool.Health()
	out := apitypes.SandboxHealth{Mode: h.Mode, Linter: h.Linter,
		Python: apitypes.PythonHealth{Status: h.Python.Status, Version: h.Python.Version, Path: h.Python.Path}}
	if b, err := json.Marshal(h.Limits); err == nil {
		out.Limits = b
	}
	if b, err := json.Marshal(h.Hardening); err == nil {
		out.Hardening = b
	}
	var reasons []string
	if h.Python.Status != "ok" {
		reasons = append(reasons, fmt.Sprintf("python runtime %s: %s", h.Python.Status, h.Python.Reason))
	}
	return out, reasons
}

// scriptError is a script failure as the API reports it (api.ScriptError).
type scriptError struct{ kind, detail string }

func (e *scriptError) Error() string  { return e.kind + ": " + e.detail }
func (e *scriptError) Kind() string   { return e.kind }
func (e *scriptError) Detail() string { return e.detail }

func toScriptError(err error) error {
	var re *sandbox.RunError
	if errors.As(err, &re) {
		d := re.Detail
		if re.Line > 0 {
			d = fmt.Sprintf("%s (line %d)", d, re.Line)
		}
		return &scriptError{kind: re.Kind, detail: d}
	}
	return err
}

// SaveScript checks code and stores it as the next version of module.
func (sc *Scripts) SaveScript(ctx context.Context, g auth.Grant, module, code string) (apitypes.ScriptSaved, error) {
	return sc.save(ctx, g, module, code)
}

func (sc *Scripts) save(ctx context.Context, g auth.Grant, module, code string) (apitypes.ScriptSaved, error) {
	if !moduleRe.MatchString(module) {
		return apitypes.ScriptSaved{}, &scriptError{kind: "invalid", detail: fmt.Sprintf("module name %q: want a letter then letters, digits or _ (at most 64)", module)}
	}
	info, err := sc.pool.Check(ctx, module, code)
	if err != nil {
		return apitypes.ScriptSaved{}, toScriptError(err)
	}
	meta, err := json.Marshal(info)
	if err != nil {
		return apitypes.ScriptSaved{}, err
	}
	ver, err := sc.s.DB.SaveScript(module, code, meta)
	if err != nil {
		return apitypes.ScriptSaved{}, err
	}
	sc.pool.SetModule(module, code, info, ver)
	sc.s.auditAdmin(g, "script.save", module, map[string]any{"version": ver})
	out := apitypes.ScriptSaved{Module: module, Version: int64(ver), Entries: entriesOf(info), Diagnostics: diagsOf(info.Diagnostics)}
	return out, nil
}

func entriesOf(info sandbox.ModuleInfo) []apitypes.ScriptEntry {
	out := []apitypes.ScriptEntry{}
	for _, e := range info.Entries {
		out = append(out, apitypes.ScriptEntry{Name: e.Name, TimeoutMS: int64(e.TimeoutMs)})
	}
	return out
}

func diagsOf(ds []sandbox.Diagnostic) []apitypes.Diagnostic {
	out := []apitypes.Diagnostic{}
	for _, d := range ds {
		out = append(out, apitypes.Diagnostic{Line: d.Line, Column: d.Column, EndLine: d.EndLine,
			EndColumn: d.EndColumn, Code: d.Code, Message: d.Message, Severity: d.Severity})
	}
	return out
}

// RunScript runs module.entry under g (its origin set to the script) and
// audits the run.
func (sc *Scripts) RunScript(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (apitypes.ScriptRun, error) {
	g.Origin = "script:" + module + "." + entry
	if d := jsonDepth(args); d > MaxArgsDepth {
		return apitypes.ScriptRun{}, &scriptError{kind: "invalid", detail: fmt.Sprintf("args nest %d levels deep; at most %d are accepted", d, MaxArgsDepth)}
	}
	start := time.Now()
	res, err := sc.pool.Run(ctx, g, module, entry, args)
	result := "ok"
	detail := ""
	if err != nil {
		err = toScriptError(err)
		var se *scriptError
		if errors.As(err, &se) {
			result, detail = se.kind, se.detail
		} else {
			result, detail = "error", err.Error()
		}
	}
	sc.s.auditAdmin(g, "script.run", module+"."+entry, map[string]any{"result": result, "detail": detail,
		"duration_ms": time.Since(start).Milliseconds()})
	if err != nil {
		return apitypes.ScriptRun{}, err
	}
	out := apitypes.ScriptRun{Result: res.Result, DurationMS: int64(res.DurationMs), Logs: []apitypes.LogLine{}}
	for _, l := range res.Logs {
		out.Logs = append(out.Logs, apitypes.LogLine{Level: l.Level, Msg: l.Msg})
	}
	return out, nil
}

// ListScripts lists the stored modules with their latest version.
func (sc *Scripts) ListScripts(context.Context, auth.Grant) ([]apitypes.ScriptInfo, error) {
	all, err := sc.s.DB.Scripts()
	if err != nil {
		return nil, err
	}
	lv := map[string][]string{}
	for _, ps := range sc.s.Project().Scripts {
		lv[ps.Module] = ps.LiveView
	}
	out := []apitypes.ScriptInfo{}
	for _, st := range all {
		var info sandbox.ModuleInfo
		_ = json.Unmarshal(st.Meta, &info) // written by save; an unreadable one lists without entries
		out = append(out, apitypes.ScriptInfo{Module: st.Module, Version: int64(st.Version), Entries: entriesOf(info), LiveView: lv[st.Module]})
	}
	return out, nil
}

// LintScript lints code: the same checks as saving (syntax, the guardrail's
// names and imports), reported as diagnostics rather than refused.
func (sc *Scripts) LintScript(ctx context.Context, code string) (apitypes.LintResult, error) {
	linter, diags, err := sc.pool.Lint(ctx, code)
	if err != nil {
		return apitypes.LintResult{}, toScriptError(err)
	}
	return apitypes.LintResult{Linter: linter, Diagnostics: diagsOf(diags)}, nil
}

// services answers the system.* calls of scripts (after the sandbox
// dispatcher checked the method's scope against the grant bound to the run):
// callService (services.go) dispatches them by namespace.
type services struct{ s *System }

func (sv services) Call(ctx context.Context, g auth.Grant, method string, params json.RawMessage) (json.RawMessage, error) {
	// A key revoked while its script runs stops that script's calls at once.
	if err := sv.s.Keys.StillValid(g); err != nil {
		return nil, err
	}
	return sv.s.callService(ctx, g, method, params)
}

// MaxArgsDepth is how deeply a script run's args may nest (arrays and
// objects). Deeper JSON would exhaust the worker's decoder stack and kill
// the worker; it is refused as invalid before it is sent.
const MaxArgsDepth = 100

// jsonDepth returns the deepest nesting of arrays and objects in raw,
// ignoring brackets inside strings.
func jsonDepth(raw []byte) int {
	depth, max := 0, 0
	inStr, esc := false, false
	for _, c := range raw {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '[' || c == '{':
			depth++
			if depth > max {
				max = depth
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return max
}
