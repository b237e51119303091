package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox/packages"
)

// The script sandbox's administration (gateway.Packages): the pool's
// package manager, its settings and the index check; every install and
// removal is audited with who made it.

// SandboxConfig returns the pool's settings as JSON.
func (s *Service) SandboxConfig(ctx context.Context) (json.RawMessage, error) {
	s.pool.AwaitStart(ctx)
	b, err := json.Marshal(s.pool.Settings(ctx))
	if err != nil {
		return nil, fmt.Errorf("sandbox settings: %w", err)
	}
	return b, nil
}

// ListPackages lists the installed packages.
func (s *Service) ListPackages(ctx context.Context) ([]gateway.Package, error) {
	pk, err := s.packages(ctx).Packages()
	if err != nil {
		return nil, err
	}
	return packagesOf(pk), nil
}

// InstallPackage installs a requirement from the configured index.
func (s *Service) InstallPackage(ctx context.Context, g auth.Grant, req gateway.PackageInstall, progress func(gateway.PackageProgress)) (gateway.PackageChange, error) {
	if !req.AcknowledgeWidening {
		progress = nil // the answer is the list of what it widens, not a stream
	}
	ch, err := s.packages(ctx).Install(ctx, packages.Request{Requirement: req.Requirement,
		Acknowledge: req.AcknowledgeWidening, By: g.Principal}, progressOf(progress))
	if err != nil {
		return gateway.PackageChange{}, packageError(err)
	}
	s.auditAdmin(g, "sandbox.package.install", req.Requirement, map[string]any{"source": "index",
		"packages": ch.Packages, "installed": packageVersions(ch.Installed), "widenings": ch.Widenings})
	return changeOf(ch), nil
}

// UploadPackages stages the uploaded wheels (each checked as it arrives)
// and installs them without an index.
func (s *Service) UploadPackages(ctx context.Context, g auth.Grant, files gateway.WheelFiles, acknowledge func() bool,
	progress func(gateway.PackageProgress)) (gateway.PackageChange, error) {
	pm := s.packages(ctx)
	up, err := pm.NewUpload()
	if err != nil {
		return gateway.PackageChange{}, err
	}
	defer func() {
		if err := up.Close(); err != nil {
			s.log.Warn("sandbox upload not cleaned up", slog.Any("err", err))
		}
	}()
	for {
		name, r, err := files()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return gateway.PackageChange{}, err
		}
		if err := up.Add(name, r); err != nil {
			return gateway.PackageChange{}, packageError(err)
		}
	}
	ack := acknowledge()
	if !ack {
		progress = nil // the answer is the list of what it widens, not a stream
	}
	ch, err := pm.Install(ctx, packages.Request{Upload: up, Acknowledge: ack, By: g.Principal}, progressOf(progress))
	if err != nil {
		return gateway.PackageChange{}, packageError(err)
	}
	s.auditAdmin(g, "sandbox.package.upload", fmt.Sprint(up.Files()), map[string]any{"source": "upload",
		"files": up.Files(), "packages": ch.Packages, "installed": packageVersions(ch.Installed), "widenings": ch.Widenings})
	return changeOf(ch), nil
}

// RemovePackage removes an installed package.
func (s *Service) RemovePackage(ctx context.Context, g auth.Grant, name string) (gateway.PackageChange, error) {
	ch, err := s.packages(ctx).Remove(ctx, name, nil)
	if err != nil {
		return gateway.PackageChange{}, packageError(err)
	}
	s.auditAdmin(g, "sandbox.package.remove", name, map[string]any{"installed": packageVersions(ch.Installed)})
	return changeOf(ch), nil
}

// CheckIndex asks whether pip can reach the configured index.
func (s *Service) CheckIndex(ctx context.Context) gateway.IndexCheck {
	c := s.packages(ctx).CheckIndex(ctx)
	return gateway.IndexCheck{IndexURL: c.IndexURL, URL: c.URL, Reachable: c.Reachable, Status: c.Status,
		DurationMS: c.DurationMs, Reason: c.Reason}
}

// packageError maps the package manager's errors onto the gateway's.
func packageError(err error) error {
	var we *packages.WideningError
	if errors.As(err, &we) {
		return &gateway.WideningError{Widenings: wideningsOf(we.Widenings)}
	}
	switch {
	case errors.Is(err, packages.ErrBadRequirement), errors.Is(err, packages.ErrBadWheel):
		return gateway.Errorf(gateway.ErrInvalid, "%w", err)
	case errors.Is(err, packages.ErrNotInstalled):
		return gateway.Errorf(gateway.ErrNotFound, "%w", err)
	case errors.Is(err, packages.ErrPackagesBusy), errors.Is(err, packages.ErrIsDependency), errors.Is(err, packages.ErrOffline):
		return gateway.Errorf(gateway.ErrConflict, "%w", err)
	case errors.Is(err, packages.ErrPip), errors.Is(err, packages.ErrNoPip):
		return gateway.Errorf(gateway.ErrInstallFailed, "%w", err)
	case errors.Is(err, packages.ErrNoRuntime):
		return &gateway.ScriptError{Kind: gateway.KindRuntimeMissing, Detail: err.Error()}
	}
	return err
}

func progressOf(progress func(gateway.PackageProgress)) func(packages.Progress) {
	if progress == nil {
		return nil
	}
	return func(p packages.Progress) { progress(gateway.PackageProgress{Step: p.Step, Message: p.Message}) }
}

func packagesOf(ps []packages.Package) []gateway.Package {
	out := make([]gateway.Package, 0, len(ps))
	for _, p := range ps {
		out = append(out, gateway.Package{Name: p.Name, Version: p.Version, Imports: p.Imports, Requested: p.Requested,
			Requirement: p.Requirement, Source: p.Source, InstalledBy: p.InstalledBy, InstalledAt: p.InstalledAt,
			Native: p.Native, Widens: p.Widens})
	}
	return out
}

func wideningsOf(ws []packages.Widening) []gateway.PackageWidening {
	out := make([]gateway.PackageWidening, 0, len(ws))
	for _, w := range ws {
		out = append(out, gateway.PackageWidening{Package: w.Package, Version: w.Version, Requested: w.Requested,
			Imports: w.Imports, Widens: w.Widens})
	}
	return out
}

func changeOf(ch packages.Change) gateway.PackageChange {
	return gateway.PackageChange{Action: ch.Action, Packages: ch.Packages, Installed: packagesOf(ch.Installed),
		Allowed: ch.Allowed, Widenings: wideningsOf(ch.Widenings), Duration: time.Duration(ch.DurationMs) * time.Millisecond}
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

// packages is the sandbox's package manager, once a start of the pool
// under way returned (the manager needs the runtime it finds).
func (s *Service) packages(ctx context.Context) *packages.Manager {
	s.pool.AwaitStart(ctx)
	return s.pool.PackageManager()
}
