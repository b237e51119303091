package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
)

// The script store (versions in the store) and the sandbox's runs
// (gateway.Scripts).

// newPool makes the sandbox pool; its system.* calls come back to the
// service (Call, ReadTags, AuditRefusal: methods.go).
func (s *Service) newPool() error {
	pool, err := sandbox.New(s.opts.Sandbox, sandboxServices{s}, s.log.With("subsystem", "sandbox"))
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	s.pool = pool
	return nil
}

// startScripts registers the stored modules and reads the project's
// script files (one that cannot be read fails the start), then starts
// the workers in the background, and after them saves each project file
// whose code differs from the stored latest version as a new version:
// the daemon is ready without waiting for the workers (docs/appliance.md,
// Readiness). Until then runs wait, each at most its timeout (the pool's
// Hold), and health shows the runtime starting. stopScripts ends it.
func (s *Service) startScripts(ctx context.Context) error {
	stored, err := s.db.Scripts()
	if err != nil {
		return err
	}
	latest := map[string]store.Script{}
	for _, st := range stored {
		latest[st.Module] = st
		var info sandbox.ModuleInfo
		if err := json.Unmarshal(st.Meta, &info); err != nil {
			s.log.Error("stored script metadata unreadable", slog.String("module", st.Module), slog.Any("err", err))
			continue
		}
		s.pool.SetModule(st.Module, st.Code, info, st.Version)
	}
	p := s.Project()
	var changed []gateway.ScriptSource
	for _, ps := range p.Scripts {
		code, err := os.ReadFile(p.ScriptFile(ps))
		if err != nil {
			return fmt.Errorf("project script %q: %w", ps.Module, err)
		}
		load, err := s.projectScriptChanged(ps.Module, string(code), latest)
		if err != nil {
			return err
		}
		if load {
			changed = append(changed, gateway.ScriptSource{Module: ps.Module, Code: string(code)})
		}
	}
	release := s.pool.Hold()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	s.warmed = done
	s.warmStop = func() { cancel(); <-done }
	started := s.pool.StartBackground(wctx)
	go func() {
		defer close(done)
		defer release()
		if err := <-started; err != nil {
			if wctx.Err() == nil {
				s.log.Error("sandbox not started", slog.Any("err", err))
			}
			return
		}
		for _, src := range changed {
			if _, err := s.SaveScript(wctx, auth.Full("project", auth.RealmPlatform, "project"), src); err != nil {
				s.log.Error("project script not loaded", slog.String("module", src.Module), slog.Any("err", err))
				continue
			}
			s.noteProjectScript(src.Module, src.Code)
		}
	}()
	return nil
}

// A project script file is loaded at start only when it changed since it
// was last loaded (docs/scripting.md, "Modules, versions and entries"): a
// version pushed since (REST, the console, MQTT) stays the running one
// until the file itself is edited. The store's meta bucket keeps, per
// module, the SHA-256 of the file's code as last loaded.
func metaProjectScript(module string) string { return "project_script_sha256/" + module }

// projectScriptChanged reports whether the project's file code for module
// must be saved as a new version: it differs from what the file held when
// last loaded (and from the latest version). A store from before the
// record is kept counts the file as loaded when any stored version has
// its code.
func (s *Service) projectScriptChanged(module, code string, latest map[string]store.Script) (bool, error) {
	sum := sha256.Sum256([]byte(code))
	was, err := s.db.Meta(metaProjectScript(module))
	if err != nil {
		return false, err
	}
	if was != nil {
		if string(was) == hex.EncodeToString(sum[:]) {
			return false, nil // the file is as last loaded: keep what runs
		}
		if st, ok := latest[module]; ok && st.Code == code {
			s.noteProjectScript(module, code)
			return false, nil
		}
		return true, nil
	}
	vs, err := s.db.ScriptVersions(module)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	for _, v := range vs {
		if v.Code == code {
			s.noteProjectScript(module, code)
			return false, nil
		}
	}
	return true, nil
}

// noteProjectScript records code as the project file's code last loaded
// for module; a record that cannot be written is logged (the next start
// then loads the file again).
func (s *Service) noteProjectScript(module, code string) {
	sum := sha256.Sum256([]byte(code))
	if err := s.db.PutMeta(metaProjectScript(module), []byte(hex.EncodeToString(sum[:]))); err != nil {
		s.log.Error("project script load not recorded", slog.String("module", module), slog.Any("err", err))
	}
}

// Warmed is closed once the sandbox's warm-up (startScripts) ended: the
// workers started, or the runtime's failure is in health.
func (s *Service) Warmed() <-chan struct{} { return s.warmed }

// stopScripts ends a warm-up still at work, then stops the workers.
func (s *Service) stopScripts(ctx context.Context) error {
	if s.warmStop != nil {
		s.warmStop()
	}
	return s.pool.Close(ctx)
}

// scriptError turns a sandbox failure into the gateway's *ScriptError:
// its line appended to the detail, unless the detail already says where
// (a refused check's "(line 3, column 5)"): the location is said once.
// Other errors pass.
func scriptError(err error) error {
	var re *sandbox.RunError
	if errors.As(err, &re) {
		d := re.Detail
		if re.Line > 0 && !strings.Contains(d, fmt.Sprintf("(line %d", re.Line)) {
			d = fmt.Sprintf("%s (line %d)", d, re.Line)
		}
		return &gateway.ScriptError{Kind: re.Kind, Detail: d}
	}
	return err
}

// SaveScript checks code and stores it as a new version of its module,
// which runs from then on (gateway.Scripts). The save is audited
// ("script.save").
func (s *Service) SaveScript(ctx context.Context, g auth.Grant, src gateway.ScriptSource) (gateway.ScriptSaved, error) {
	if err := gateway.CheckName("module", src.Module); err != nil {
		return gateway.ScriptSaved{}, &gateway.ScriptError{Kind: gateway.KindInvalid,
			Detail: strings.TrimPrefix(err.Error(), gateway.ErrInvalid.Error()+": ")}
	}
	if src.Version < 0 {
		return gateway.ScriptSaved{}, fmt.Errorf("%w: module %s: version %d must be positive", gateway.ErrInvalid, src.Module, src.Version)
	}
	info, err := s.pool.Check(ctx, src.Module, src.Code)
	if err != nil {
		return gateway.ScriptSaved{}, scriptError(err)
	}
	meta, err := json.Marshal(info)
	if err != nil {
		return gateway.ScriptSaved{}, err
	}
	ver := int(src.Version)
	if src.Version == 0 {
		ver, err = s.db.SaveScript(src.Module, src.Code, meta)
	} else {
		err = s.db.SaveScriptAt(src.Module, ver, src.Code, meta)
	}
	switch {
	case errors.Is(err, store.ErrStaleVersion):
		return gateway.ScriptSaved{}, fmt.Errorf("%w: module %s: %v; nothing saved", gateway.ErrConflict, src.Module, err)
	case err != nil:
		return gateway.ScriptSaved{}, err
	}
	s.pool.SetModule(src.Module, src.Code, info, ver)
	s.auditAdmin(g, "script.save", src.Module, map[string]any{"version": ver})
	return gateway.ScriptSaved{Module: src.Module, Version: int64(ver), Entries: entriesOf(info), Diagnostics: diagsOf(info.Diagnostics)}, nil
}

// RollbackScript withdraws a module's latest version; the one before runs
// again (gateway.Scripts). Audited ("script.rollback").
func (s *Service) RollbackScript(_ context.Context, g auth.Grant, module string) (gateway.ScriptSaved, error) {
	if err := gateway.CheckName("module", module); err != nil {
		return gateway.ScriptSaved{}, err
	}
	if err := s.canAudit(); err != nil {
		return gateway.ScriptSaved{}, fmt.Errorf("rollback of %s refused, nothing changed: %w", module, err)
	}
	prev, err := s.db.Script(module)
	if err != nil {
		return gateway.ScriptSaved{}, s.scriptErr(module, 0, err)
	}
	cur, err := s.db.DropLatestScript(module)
	switch {
	case errors.Is(err, store.ErrOnlyVersion):
		return gateway.ScriptSaved{}, gateway.Errorf(gateway.ErrConflict, "module %q has only version %d: nothing to roll back to", module, prev.Version)
	case err != nil:
		return gateway.ScriptSaved{}, s.scriptErr(module, 0, err)
	}
	var info sandbox.ModuleInfo
	if len(cur.Meta) > 0 {
		if err := json.Unmarshal(cur.Meta, &info); err != nil {
			return gateway.ScriptSaved{}, fmt.Errorf("module %s version %d: metadata unreadable: %w", module, cur.Version, err)
		}
	}
	s.pool.SetModule(module, cur.Code, info, cur.Version)
	s.auditAdmin(g, "script.rollback", module, map[string]any{"from": prev.Version, "to": cur.Version})
	return gateway.ScriptSaved{Module: module, Version: int64(cur.Version), Entries: entriesOf(info), Diagnostics: diagsOf(info.Diagnostics)}, nil
}

// ScriptVersions lists a module's stored versions (gateway.Scripts).
func (s *Service) ScriptVersions(_ context.Context, _ auth.Grant, module string) ([]gateway.ScriptVersion, error) {
	vs, err := s.db.ScriptVersions(module)
	if err != nil {
		return nil, s.scriptErr(module, 0, err)
	}
	out := make([]gateway.ScriptVersion, len(vs))
	for i, v := range vs {
		out[i] = gateway.ScriptVersion{Version: int64(v.Version), Saved: v.Saved}
	}
	return out, nil
}

// scriptErr words a store error about module (version 0: the latest) as
// a run of it does: `unknown module "nomod"`, `module "pumps" has no
// version 7` (ErrNotFound); other errors as kinded.
func (s *Service) scriptErr(module string, version int, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return kinded(err)
	}
	if version > 0 {
		if _, e := s.db.Script(module); e == nil {
			return gateway.Errorf(gateway.ErrNotFound, "module %q has no version %d", module, version)
		}
	}
	return gateway.Errorf(gateway.ErrNotFound, "unknown module %q", module)
}

func entriesOf(info sandbox.ModuleInfo) []gateway.ScriptEntry {
	out := []gateway.ScriptEntry{}
	for _, e := range info.Entries {
		out = append(out, gateway.ScriptEntry{Name: e.Name, Timeout: time.Duration(e.TimeoutMs) * time.Millisecond})
	}
	return out
}

func diagsOf(ds []sandbox.Diagnostic) []gateway.Diagnostic {
	out := []gateway.Diagnostic{}
	for _, d := range ds {
		out = append(out, gateway.Diagnostic{Line: d.Line, Column: d.Column, EndLine: d.EndLine,
			EndColumn: d.EndColumn, Code: d.Code, Message: d.Message, Severity: d.Severity})
	}
	return out
}

// MaxArgsDepth is how deeply a script run's args may nest (arrays and
// objects). Deeper JSON would exhaust the worker's decoder stack and kill
// the worker; it is refused as invalid before it is sent.
const MaxArgsDepth = 100

// RunScript runs module.entry under g, its origin set to the script, and
// audits the run ("script.run", its result "ok" or the failure's kind)
// (gateway.Scripts). Absent args (nil or empty: a REST request or an MQTT
// command without "args", a panel button without args:) reach the entry
// as {} (docs/scripting.md, "args and the result"); a JSON null is passed as None.
func (s *Service) RunScript(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (gateway.ScriptRun, error) {
	g.Origin = "script:" + module + "." + entry
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if d := jsonDepth(args); d > MaxArgsDepth {
		return gateway.ScriptRun{}, &gateway.ScriptError{Kind: gateway.KindInvalid, Detail: fmt.Sprintf("args nest %d levels deep; at most %d are accepted", d, MaxArgsDepth)}
	}
	start := time.Now()
	res, err := s.pool.Run(ctx, g, module, entry, args)
	result, detail := "ok", ""
	if err != nil {
		err = scriptError(err)
		var se *gateway.ScriptError
		if errors.As(err, &se) {
			result, detail = se.Kind, se.Detail
		} else {
			result, detail = "error", err.Error()
		}
	}
	// The record's own result says what happened (ok, or the failure's
	// kind: script_error, timeout, permission_denied, ...), so the audit
	// can be filtered by it.
	rec := record(g, "script.run", module+"."+entry, result, detail)
	rec.After, _ = json.Marshal(map[string]any{"duration_ms": time.Since(start).Milliseconds()})
	s.enqueue(rec)
	if err != nil {
		return gateway.ScriptRun{}, err
	}
	out := gateway.ScriptRun{Result: res.Result, Duration: time.Duration(res.DurationMs * float64(time.Millisecond)), Logs: []gateway.LogLine{}}
	for _, l := range res.Logs {
		out.Logs = append(out.Logs, gateway.LogLine{Level: l.Level, Msg: l.Msg})
	}
	return out, nil
}

// ListScripts lists the stored modules with their latest version and the
// entries LiveView may start (gateway.Scripts).
func (s *Service) ListScripts(context.Context, auth.Grant) ([]gateway.ScriptInfo, error) {
	all, err := s.db.Scripts()
	if err != nil {
		return nil, err
	}
	lv := map[string][]string{}
	for _, ps := range s.Project().Scripts {
		lv[ps.Module] = ps.LiveView
	}
	out := []gateway.ScriptInfo{}
	for _, st := range all {
		var info sandbox.ModuleInfo
		_ = json.Unmarshal(st.Meta, &info) // written by SaveScript; an unreadable one lists without entries
		out = append(out, gateway.ScriptInfo{Module: st.Module, Version: int64(st.Version), Entries: entriesOf(info), LiveView: lv[st.Module]})
	}
	return out, nil
}

// LintScript lints code: the same checks as a save, reported as
// diagnostics rather than refused (gateway.Scripts).
func (s *Service) LintScript(ctx context.Context, code string) (gateway.LintResult, error) {
	linter, diags, err := s.pool.Lint(ctx, code)
	if err != nil {
		return gateway.LintResult{}, scriptError(err)
	}
	return gateway.LintResult{Linter: linter, Diagnostics: diagsOf(diags)}, nil
}

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
