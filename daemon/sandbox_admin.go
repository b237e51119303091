package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/sandbox/packages"
)

// auditFunc records an administrative change (System.auditAdmin).
type auditFunc func(g auth.Grant, action, target string, detail any)

// sandboxAdmin is the script sandbox's administration for the API
// (api.SandboxAdmin, DESIGN.md "/sandbox/... | sandbox_admin"): the pool's
// package operations, its settings and the index check, with every install
// and removal audited with who made it.
type sandboxAdmin struct {
	pool  *sandbox.Pool
	audit auditFunc
	log   *slog.Logger
}

// newSandboxAdmin returns the adapter; audit is System.auditAdmin in the
// daemon.
func newSandboxAdmin(pool *sandbox.Pool, audit auditFunc, log *slog.Logger) *sandboxAdmin {
	return &sandboxAdmin{pool: pool, audit: audit, log: log}
}

var _ api.SandboxAdmin = (*sandboxAdmin)(nil)

// SandboxConfig returns the pool's settings as JSON.
func (a *sandboxAdmin) SandboxConfig(ctx context.Context) (apitypes.SandboxConfig, error) {
	b, err := json.Marshal(a.pool.Settings(ctx))
	if err != nil {
		return nil, fmt.Errorf("sandbox settings: %w", err)
	}
	return b, nil
}

// ListPackages lists the installed packages.
func (a *sandboxAdmin) ListPackages(context.Context) ([]apitypes.SandboxPackage, error) {
	pk, err := a.pool.PackageManager().Packages()
	if err != nil {
		return nil, err
	}
	return wirePackages(pk), nil
}

// InstallPackage installs a requirement from the configured index.
func (a *sandboxAdmin) InstallPackage(ctx context.Context, g auth.Grant, req apitypes.PackageInstallRequest,
	progress func(apitypes.PackageEvent)) (apitypes.PackageChange, error) {
	if !req.AcknowledgeWidening {
		progress = nil // the answer is the list of what it widens, not a stream
	}
	ch, err := a.pool.PackageManager().Install(ctx, packages.Request{Requirement: req.Requirement,
		Acknowledge: req.AcknowledgeWidening, By: g.Principal}, wireProgress(progress))
	if err != nil {
		return apitypes.PackageChange{}, packageError(err)
	}
	a.audit(g, "sandbox.package.install", req.Requirement, map[string]any{"source": "index",
		"packages": ch.Packages, "installed": packageVersions(ch.Installed), "widenings": ch.Widenings})
	return wireChange(ch), nil
}

// UploadPackages stages the uploaded wheels (each checked as it arrives)
// and installs them without an index.
func (a *sandboxAdmin) UploadPackages(ctx context.Context, g auth.Grant, files api.WheelFiles, acknowledge func() bool,
	progress func(apitypes.PackageEvent)) (apitypes.PackageChange, error) {
	up, err := a.pool.PackageManager().NewUpload()
	if err != nil {
		return apitypes.PackageChange{}, err
	}
	defer func() {
		if err := up.Close(); err != nil {
			a.log.Warn("sandbox upload not cleaned up", slog.Any("err", err))
		}
	}()
	for {
		name, r, err := files()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return apitypes.PackageChange{}, err
		}
		if err := up.Add(name, r); err != nil {
			return apitypes.PackageChange{}, packageError(err)
		}
	}
	ack := acknowledge()
	if !ack {
		progress = nil // the answer is the list of what it widens, not a stream
	}
	ch, err := a.pool.PackageManager().Install(ctx, packages.Request{Upload: up, Acknowledge: ack, By: g.Principal},
		wireProgress(progress))
	if err != nil {
		return apitypes.PackageChange{}, packageError(err)
	}
	a.audit(g, "sandbox.package.upload", fmt.Sprint(up.Files()), map[string]any{"source": "upload",
		"files": up.Files(), "packages": ch.Packages, "installed": packageVersions(ch.Installed), "widenings": ch.Widenings})
	return wireChange(ch), nil
}

// RemovePackage removes an installed package.
func (a *sandboxAdmin) RemovePackage(ctx context.Context, g auth.Grant, name string) (apitypes.PackageChange, error) {
	ch, err := a.pool.PackageManager().Remove(ctx, name, nil)
	if err != nil {
		return apitypes.PackageChange{}, packageError(err)
	}
	a.audit(g, "sandbox.package.remove", name, map[string]any{"installed": packageVersions(ch.Installed)})
	return wireChange(ch), nil
}

// CheckIndex asks whether pip can reach the configured index.
func (a *sandboxAdmin) CheckIndex(ctx context.Context) apitypes.IndexCheck {
	c := a.pool.PackageManager().CheckIndex(ctx)
	return apitypes.IndexCheck{IndexURL: c.IndexURL, URL: c.URL, Reachable: c.Reachable, Status: c.Status,
		DurationMS: c.DurationMs, Reason: c.Reason}
}

// packageError maps the sandbox's package errors to the API's.
func packageError(err error) error {
	var we *packages.WideningError
	if errors.As(err, &we) {
		return &api.WideningError{Widenings: wireWidenings(we.Widenings)}
	}
	switch {
	case errors.Is(err, packages.ErrBadRequirement), errors.Is(err, packages.ErrBadWheel):
		return fmt.Errorf("%w: %v", api.ErrInvalid, err)
	case errors.Is(err, packages.ErrNotInstalled):
		return fmt.Errorf("%w: %v", api.ErrNotFound, err)
	case errors.Is(err, packages.ErrPackagesBusy), errors.Is(err, packages.ErrIsDependency), errors.Is(err, packages.ErrOffline):
		return fmt.Errorf("%w: %v", api.ErrPackageConflict, err)
	case errors.Is(err, packages.ErrPip), errors.Is(err, packages.ErrNoPip):
		return fmt.Errorf("%w: %v", api.ErrInstallFailed, err)
	}
	if errors.Is(err, packages.ErrNoRuntime) {
		return &scriptError{kind: string(sandbox.KindRuntimeMissing), detail: err.Error()} // 503
	}
	return err
}

func wireProgress(progress func(apitypes.PackageEvent)) func(packages.Progress) {
	if progress == nil {
		return nil
	}
	return func(p packages.Progress) {
		progress(apitypes.PackageEvent{Step: p.Step, Message: p.Message})
	}
}

func wirePackages(ps []packages.Package) []apitypes.SandboxPackage {
	out := make([]apitypes.SandboxPackage, 0, len(ps))
	for _, p := range ps {
		w := apitypes.SandboxPackage{Name: p.Name, Version: p.Version, Imports: p.Imports, Requested: p.Requested,
			Requirement: p.Requirement, Source: p.Source, InstalledBy: p.InstalledBy, Native: p.Native, Widens: p.Widens}
		if !p.InstalledAt.IsZero() {
			t := p.InstalledAt
			w.InstalledAt = &t
		}
		out = append(out, w)
	}
	return out
}

func wireWidenings(ws []packages.Widening) []apitypes.PackageWidening {
	out := make([]apitypes.PackageWidening, 0, len(ws))
	for _, w := range ws {
		out = append(out, apitypes.PackageWidening{Package: w.Package, Version: w.Version, Requested: w.Requested,
			Imports: w.Imports, Widens: w.Widens})
	}
	return out
}

func wireChange(ch packages.Change) apitypes.PackageChange {
	return apitypes.PackageChange{Action: ch.Action, Packages: ch.Packages, Installed: wirePackages(ch.Installed),
		Allowed: ch.Allowed, Widenings: wireWidenings(ch.Widenings), DurationMS: ch.DurationMs}
}

// packageVersions is name==version of each installed package, for the
// audit record.
func packageVersions(ps []packages.Package) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name+"=="+p.Version)
	}
	return out
}
