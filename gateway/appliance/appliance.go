package appliance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/backup"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/systemd"
)

// Options configures New.
type Options struct {
	Settings    Settings
	DataDir     string
	ApplianceID string
	// Version is the running daemon's version (recorded in backups).
	Version string
	// ProjectFile is the daemon config's project file ("" for none): a
	// backup carries it, with the script files it names that lie beside
	// or below it.
	ProjectFile string
	// Project returns the running project (its scripts' files); nil: the
	// project file alone.
	Project func() *config.Project
	// Store is the running store; a backup snapshots it in one read
	// transaction (*store.DB).
	Store backup.Store
	// Audit records every flash, backup, restore and log level change.
	Audit gateway.Audit
	// Level is the daemon's log level, changed by SetLogLevel.
	Level *slog.LevelVar
	// Restart asks the daemon to stop and exit for systemd to restart it
	// (exit status 75): a bundle or a restore is staged. It must not
	// block; the request that caused it still gets its answer (the API
	// shuts down gracefully).
	Restart func(reason string)
	// Slot is the slot the daemon runs from ("" when it does not run from
	// a slot: a development build cannot be flashed). Zero: found from
	// the executable (slots.SlotOfExecutable).
	Slot string
	Log  *slog.Logger
}

// Appliance implements gateway.Appliance. Safe for concurrent use; one
// upload (a flash or a restore) is received at a time.
type Appliance struct {
	opts   Options
	layout slots.Layout
	log    *slog.Logger

	busy     sync.Mutex // held while an upload is received
	upload   atomic.Pointer[upload]
	restarts atomic.Bool
}

type upload struct {
	started  time.Time
	received atomic.Int64
}

var _ gateway.Appliance = (*Appliance)(nil)

// New returns the appliance's operations over opts.
func New(opts Options) *Appliance {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Level == nil {
		opts.Level = new(slog.LevelVar)
	}
	l := opts.Settings.Layout(opts.DataDir)
	// An upload cut short by a crash or a power cut leaves its spool file
	// (firmware.Flash removes it otherwise); it is never a pending bundle.
	if stale, _ := filepath.Glob(filepath.Join(opts.DataDir, firmware.StageDir, ".incoming-*")); len(stale) > 0 {
		for _, f := range stale {
			os.Remove(f)
		}
		log.Info("removed the spool of a firmware upload cut short", slog.Int("files", len(stale)))
	}
	if opts.Slot == "" {
		if s, err := slots.SlotOfExecutable(l); err == nil {
			opts.Slot = s
		}
	}
	return &Appliance{opts: opts, layout: l, log: log}
}

// Layout is the slots' layout the appliance works on.
func (a *Appliance) Layout() slots.Layout { return a.layout }

// Slot is the slot the daemon runs from ("" outside a slot).
func (a *Appliance) Slot() string { return a.opts.Slot }

// refusal wraps a firmware or backup error that names a rule.
func refusal(kind string, err error) error {
	if kind == "" {
		return err
	}
	return &gateway.Refusal{Kind: kind, Err: err}
}

// Flash implements gateway.Appliance (firmware.Flash, then a restart).
func (a *Appliance) Flash(ctx context.Context, g auth.Grant, body io.Reader, force bool) (gateway.FlashResult, error) {
	if err := a.opts.Audit.CanAudit(); err != nil {
		return gateway.FlashResult{}, err
	}
	res, err := a.flash(ctx, body, force)
	ev := gateway.AuditEvent{Action: "firmware.flash", Target: "bundle " + res.Version, Result: "ok",
		After: map[string]any{"version": res.Version, "arch": res.Arch, "key": res.Key, "slot": res.Slot,
			"size": res.Size, "sha256": res.SHA256, "forced": force, "previous_version": res.Previous}}
	if err != nil {
		ev.Result, ev.Detail = "failed", err.Error()
		var r *gateway.Refusal
		if errors.As(err, &r) {
			ev.Result = r.Kind
		}
		a.log.Warn("firmware bundle refused", slog.String("version", res.Version), slog.Any("err", err))
	}
	if aerr := a.opts.Audit.Audit(ctx, g, ev); aerr != nil {
		a.log.Error("firmware flash not audited", slog.Any("err", aerr))
	}
	if err != nil {
		return res, err
	}
	a.log.Info("firmware bundle verified and staged; restarting to install it", slog.String("version", res.Version),
		slog.String("slot", res.Slot), slog.String("key", res.Key), slog.Int64("bytes", res.Size))
	a.restart(fmt.Sprintf("firmware %s staged for slot %s; restarting to install it", res.Version, res.Slot))
	return res, nil
}

func (a *Appliance) flash(ctx context.Context, body io.Reader, force bool) (gateway.FlashResult, error) {
	if a.opts.Slot == "" {
		return gateway.FlashResult{}, refusal("no_slots", fmt.Errorf("this daemon does not run from a firmware slot under %s (a development build): nothing to flash into", a.layout.Root))
	}
	if a.restarts.Load() {
		return gateway.FlashResult{}, refusal("busy", fmt.Errorf("%w: the daemon is restarting to apply a staged bundle or restore", firmware.ErrBusy))
	}
	if !a.busy.TryLock() {
		return gateway.FlashResult{}, refusal("busy", fmt.Errorf("%w: another upload is being received", firmware.ErrBusy))
	}
	defer a.busy.Unlock()
	keys, err := firmware.LoadTrustedKeys(a.opts.Settings.TrustedKeys)
	if err != nil {
		return gateway.FlashResult{}, fmt.Errorf("%w: trusted firmware keys: %v", gateway.ErrUnavailable, err)
	}
	up := &upload{started: time.Now().UTC()}
	a.upload.Store(up)
	defer a.upload.Store(nil)
	next := int64(16 << 20)
	r, err := firmware.Flash(ctx, body, firmware.FlashOptions{Layout: a.layout, Keys: keys, Force: force,
		MaxSize: a.opts.Settings.MaxSize, Progress: func(n int64) {
			up.received.Store(n)
			if n >= next {
				next = n + 16<<20
				a.log.Info("firmware upload", slog.Int64("bytes", n))
			}
		}})
	out := gateway.FlashResult{Version: r.Version, Arch: r.Arch, Key: r.Key, Slot: r.Slot, Size: r.Size, SHA256: r.SHA256,
		Forced: r.Forced, Previous: r.Previous, RestartRequired: r.RestartRequired}
	if err != nil {
		return out, refusal(firmware.Kind(err), err)
	}
	return out, nil
}

func (a *Appliance) restart(reason string) {
	a.restarts.Store(true)
	systemd.Status(reason)
	if a.opts.Restart != nil {
		a.opts.Restart(reason)
	}
}

// FirmwareStatus implements gateway.Appliance (slots.json).
func (a *Appliance) FirmwareStatus(context.Context) (gateway.FirmwareStatus, error) {
	st, err := slots.Load(a.layout)
	if err != nil {
		return gateway.FirmwareStatus{}, err
	}
	cur, _ := slots.CurrentSlot(a.layout)
	out := gateway.FirmwareStatus{Running: a.opts.Slot, Active: st.Active, Current: cur, Trial: st.Trial, BootCount: st.BootCount,
		BootLimit: st.BootLimit, Slots: map[string]gateway.SlotStatus{}}
	for _, s := range []string{slots.A, slots.B} {
		i := st.Slots[s]
		out.Slots[s] = gateway.SlotStatus{Version: i.Version, Arch: i.Arch, SchemaVersion: i.SchemaVersion, InstalledAt: i.InstalledAt, Bad: i.Bad}
	}
	conv := func(r slots.Result) gateway.SlotResult {
		return gateway.SlotResult{Time: r.Time, Action: r.Action, Slot: r.Slot, Version: r.Version, OK: r.OK, Message: r.Message}
	}
	if st.Last != nil {
		l := conv(*st.Last)
		out.Last = &l
	}
	for _, r := range st.History {
		out.History = append(out.History, conv(r))
	}
	if up := a.upload.Load(); up != nil {
		out.Upload = &gateway.UploadProgress{Received: up.received.Load(), Started: up.started}
	}
	return out, nil
}

// LogLevel implements gateway.Appliance.
func (a *Appliance) LogLevel() string { return a.opts.Level.Level().String() }

// SetLogLevel implements gateway.Appliance (audited as "log.level").
func (a *Appliance) SetLogLevel(ctx context.Context, g auth.Grant, level string) (string, error) {
	l, err := systemd.ParseLevel(level)
	if err != nil {
		return "", fmt.Errorf("%w: %v", gateway.ErrInvalid, err)
	}
	if err := a.opts.Audit.CanAudit(); err != nil {
		return "", err
	}
	before := a.opts.Level.Level()
	a.opts.Level.Set(l)
	if err := a.opts.Audit.Audit(ctx, g, gateway.AuditEvent{Action: "log.level", Target: "qubiqd", Result: "ok",
		After: map[string]string{"before": before.String(), "after": l.String()}}); err != nil {
		a.log.Error("log level change not audited", slog.Any("err", err))
	}
	a.log.Log(ctx, max(l, slog.LevelInfo), "log level changed", slog.String("from", before.String()), slog.String("to", l.String()),
		slog.String("by", g.Principal))
	return l.String(), nil
}
