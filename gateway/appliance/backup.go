package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/backup"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/internal/atomicfile"
)

// restoreOptionsFile, beside the staged backup, keeps what the restore was
// asked to do until the next start applies it.
const restoreOptionsFile = "pending-options.json"

// restoreOptions persist the request until the next start; the file is
// 0600 in the data directory, which holds the secrets key itself.
type restoreOptions struct {
	KeepCredentials bool   `json:"keep_credentials"`
	Passphrase      []byte `json:"passphrase,omitempty"`
}

// Backup implements gateway.Appliance (backup.Write over the running
// store; audited as "appliance.backup").
func (a *Appliance) Backup(ctx context.Context, g auth.Grant, w io.Writer, req gateway.BackupRequest) error {
	if err := a.opts.Audit.CanAudit(); err != nil {
		return err
	}
	opts := backup.WriteOptions{Store: a.opts.Store, DataDir: a.opts.DataDir, ApplianceID: a.opts.ApplianceID, Version: a.opts.Version,
		Passphrase: req.Passphrase}
	if a.opts.ProjectFile != "" {
		opts.ProjectDir, opts.ProjectFiles = filepath.Dir(a.opts.ProjectFile), a.projectFiles()
	}
	m, err := backup.Write(ctx, w, opts)
	ev := gateway.AuditEvent{Action: "appliance.backup", Target: a.opts.ApplianceID, Result: "ok"}
	if err != nil {
		ev.Result, ev.Detail = "failed", err.Error()
	} else {
		ev.After = map[string]any{"entries": len(m.Entries), "created": m.Created, "secrets": m.Secrets}
	}
	if aerr := a.opts.Audit.Audit(ctx, g, ev); aerr != nil {
		a.log.Error("backup not audited", slog.Any("err", aerr))
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	a.log.Info("backup written", slog.Int("entries", len(m.Entries)))
	return nil
}

// projectFiles are the project file and the script files it names that lie
// beside or below it, relative to its directory (the store holds every
// script's code in any case).
func (a *Appliance) projectFiles() []string {
	dir := filepath.Dir(a.opts.ProjectFile)
	files := []string{filepath.Base(a.opts.ProjectFile)}
	if a.opts.Project == nil {
		return files
	}
	p := a.opts.Project()
	if p == nil || p.File == "" {
		return files
	}
	seen := map[string]bool{files[0]: true}
	for _, sc := range p.Scripts {
		if sc.File == "" {
			continue
		}
		rel, err := filepath.Rel(dir, p.ScriptFile(sc))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || seen[rel] {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			continue
		}
		seen[rel] = true
		files = append(files, rel)
	}
	return files
}

// StageRestore implements gateway.Appliance (backup.StagePending, then a
// restart; audited as "appliance.restore").
func (a *Appliance) StageRestore(ctx context.Context, g auth.Grant, body io.Reader, req gateway.RestoreRequest) (gateway.RestoreStaged, error) {
	if err := a.opts.Audit.CanAudit(); err != nil {
		return gateway.RestoreStaged{}, err
	}
	out, err := a.stageRestore(ctx, body, req)
	ev := gateway.AuditEvent{Action: "appliance.restore", Target: out.ApplianceID, Result: "ok",
		After: map[string]any{"from_appliance": out.ApplianceID, "version": out.Version, "created": out.Created, "keep_credentials": req.KeepCredentials}}
	if err != nil {
		ev.Result, ev.Detail = "failed", err.Error()
		var r *gateway.Refusal
		if errors.As(err, &r) {
			ev.Result = r.Kind
		}
	}
	if aerr := a.opts.Audit.Audit(ctx, g, ev); aerr != nil {
		a.log.Error("restore not audited", slog.Any("err", aerr))
	}
	if err != nil {
		return out, err
	}
	a.restart(fmt.Sprintf("backup of %s staged; restarting to restore it", out.ApplianceID))
	return out, nil
}

func (a *Appliance) stageRestore(ctx context.Context, body io.Reader, req gateway.RestoreRequest) (gateway.RestoreStaged, error) {
	if a.restarts.Load() {
		return gateway.RestoreStaged{}, refusal("busy", errors.New("the daemon is restarting to apply a staged bundle or restore"))
	}
	if !a.busy.TryLock() {
		return gateway.RestoreStaged{}, refusal("busy", errors.New("another upload is being received"))
	}
	defer a.busy.Unlock()
	m, err := backup.StagePending(ctx, body, backup.RestoreOptions{DataDir: a.opts.DataDir, MaxSize: a.opts.Settings.MaxBackup,
		Passphrase: req.Passphrase})
	if err != nil {
		kind := ""
		switch {
		case errors.Is(err, backup.ErrFormat):
			kind = "format"
		case errors.Is(err, backup.ErrHash):
			kind = "hash"
		case errors.Is(err, backup.ErrSignature):
			kind = "signature"
		case errors.Is(err, backup.ErrPassword):
			kind = "passphrase"
		}
		return gateway.RestoreStaged{}, refusal(kind, err)
	}
	b, _ := json.Marshal(restoreOptions{KeepCredentials: req.KeepCredentials, Passphrase: req.Passphrase})
	if err := atomicfile.WriteFile(filepath.Join(a.opts.DataDir, backup.PendingDir, restoreOptionsFile), b, 0o600); err != nil {
		os.Remove(filepath.Join(a.opts.DataDir, backup.PendingDir, backup.PendingFile))
		return gateway.RestoreStaged{}, err
	}
	return gateway.RestoreStaged{ApplianceID: m.ApplianceID, Version: m.Version, Created: m.Created, Entries: len(m.Entries),
		RestartRequired: true}, nil
}

// ApplyPendingRestore restores a backup StageRestore staged, if any, into
// dataDir: the daemon calls it before it opens the store. The store found
// there is kept beside it (backup.ApplyPending). It reports whether one
// was applied; a failed restore is an error (the previous store is back)
// and is not tried again.
func ApplyPendingRestore(ctx context.Context, dataDir string, s Settings, log *slog.Logger) (bool, error) {
	dir := filepath.Join(dataDir, backup.PendingDir)
	var ro restoreOptions
	if b, err := os.ReadFile(filepath.Join(dir, restoreOptionsFile)); err == nil {
		_ = json.Unmarshal(b, &ro)
	}
	ok, res, err := backup.ApplyPending(ctx, backup.RestoreOptions{DataDir: dataDir, KeepCredentials: ro.KeepCredentials,
		Passphrase: ro.Passphrase, MaxSize: s.MaxBackup})
	os.Remove(filepath.Join(dir, restoreOptionsFile))
	if err != nil {
		return false, fmt.Errorf("restore of the staged backup failed (the previous store is back; %s says why): %w",
			filepath.Join(dir, backup.ResultFile), err)
	}
	if ok {
		from := ""
		if res.Manifest != nil {
			from = res.Manifest.ApplianceID
		}
		log.Info("backup restored into the data directory", slog.String("from_appliance", from),
			slog.Int("dropped_api_keys", res.DroppedAPIKeys), slog.Int("dropped_sessions", res.DroppedSessions),
			slog.Any("resealed", res.Resealed), slog.Bool("kept_credentials", ro.KeepCredentials))
	}
	return ok, nil
}
