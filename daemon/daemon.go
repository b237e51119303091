// Package daemon holds the one struct that builds every subsystem of qubiqd
// from the configuration, wires them together through the interfaces each
// subsystem defines, starts them in order and stops them in reverse (STYLE.md
// §14, like tailscale's tsd.System). Subsystems never reach into it; only
// cmd/qubiqd imports it.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/systemd"
	"qubiq.dev/edge/tagengine"
)

// Version is the daemon's version, set at build time with
// -ldflags "-X qubiq.dev/edge/daemon.Version=...".
var Version = "0.1.0-dev"

// BootstrapTokenFile is the name of the one-time token file in the data dir
// (DESIGN.md, "Credentials on first start").
const BootstrapTokenFile = "bootstrap-token"

const metaBootstrapHash = "bootstrap_token_hash"

// System is the running daemon: every subsystem, built by New.
//
// The project and the tag engine are replaced as a whole when a project is
// imported (ApplyProject, project.go); read them through Project and
// Engine at each use and never keep them.
type System struct {
	Config *config.Daemon
	Log    *slog.Logger

	DB      *store.DB
	Audit   *store.AuditLog
	Keys    *auth.Keys
	API     *api.Server
	Scripts *Scripts
	Data    *Data // system.* beyond tags: vars, history, files, db, messages (data.go)

	project atomic.Pointer[config.Project]   // the running project (Project)
	engine  atomic.Pointer[tagengine.Engine] // the running tag engine (Engine)
	applyMu sync.Mutex                       // serialises project imports (ApplyProject)

	devices map[string]device.Driver
	started time.Time
	apiSeen atomic.Int64 // unix nanos of the last request served (watchdog)

	// resolved holds the OPC UA addresses converted to the nsu= form
	// (resolved.go).
	resolved resolvedAddrs
}

// Project returns the running project. A project import replaces it
// (ApplyProject); the value returned is never changed.
func (s *System) Project() *config.Project { return s.project.Load() }

// Engine returns the running tag engine. A project import replaces it
// (ApplyProject): fetch it at each use.
func (s *System) Engine() *tagengine.Engine { return s.engine.Load() }

// New builds the system from cfg: opens the store (bounded by
// store.open_timeout), loads the project, builds the drivers and the tag
// engine, seeds last values, creates the bootstrap token on an empty store,
// and prepares the API. Nothing runs until Run. On error everything opened
// is closed again.
func New(ctx context.Context, cfg *config.Daemon, log *slog.Logger) (_ *System, err error) {
	s := &System{Config: cfg, Log: log, started: time.Now()}
	defer func() {
		if err != nil {
			s.close(context.Background())
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	s.DB, err = store.Open(filepath.Join(cfg.DataDir, "qubiq.db"), store.Options{Timeout: cfg.Store.OpenTimeout.D(), Logger: log.With("subsystem", "store")})
	if err != nil {
		return nil, err
	}
	s.Audit = store.NewAuditLog(s.DB, store.AuditOptions{}, log.With("subsystem", "audit"))
	s.Keys = auth.NewKeys(s.DB.AuthKeyStore())
	if err := s.loadProject(); err != nil {
		return nil, err
	}
	if err := s.buildEngine(); err != nil {
		return nil, err
	}
	if err := s.bootstrap(); err != nil {
		return nil, err
	}
	if s.Data, err = NewData(s); err != nil {
		return nil, err
	}
	if s.Scripts, err = newScripts(ctx, s); err != nil {
		return nil, err
	}
	lv, err := s.newLiveView()
	if err != nil {
		return nil, err
	}
	s.API, err = api.New(lv.Config(cfg.HTTP.Listen), lv.Deps(api.Deps{
		Refusals: refusals{s},
		Audit:    auditAPI{s},
		Auth:     authenticator{s},
		Tags:     tagsAPI{s},
		Scripts:  s.Scripts,
		APIKeys:  keysAPI{s},
		Health:   healthAPI{s},
		Devices:  devicesAPI{s},
		Data:     DataAPI(s.Data),
		Sandbox:  newSandboxAdmin(s.Scripts.pool, s.auditAdmin, log.With("subsystem", "sandbox")), // sandbox_admin routes
		Certs:    certsAPI{s},                                                                     // OPC UA certificate stores (certs.go)
		Project:  projectAPI{s},                                                                   // project and tag import/export, browse (project.go)
	}), log.With("subsystem", "api"))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// loadProject reads the project file named by the config and keeps a copy
// in the store; without a file, the stored project is used.
func (s *System) loadProject() error {
	if s.Config.Project != "" {
		p, err := config.LoadProject(s.Config.Project)
		if err != nil {
			return err
		}
		raw, err := os.ReadFile(s.Config.Project)
		if err != nil {
			return err
		}
		doc, _ := json.Marshal(map[string]any{"version": 1, "yaml": string(raw), "file": s.Config.Project})
		if err := s.DB.PutProject(doc); err != nil {
			return err
		}
		s.project.Store(p)
		return nil
	}
	doc, err := s.DB.Project()
	if err != nil {
		return err
	}
	s.project.Store(&config.Project{File: s.projectFile()})
	if doc == nil {
		return nil
	}
	var stored struct {
		YAML string `json:"yaml"`
	}
	if err := json.Unmarshal(doc, &stored); err != nil {
		return fmt.Errorf("stored project: %w", err)
	}
	p, err := config.ParseProject([]byte(stored.YAML))
	if err != nil {
		return fmt.Errorf("stored project: %w", err)
	}
	p.File = s.projectFile()
	s.project.Store(p)
	return nil
}

// BuildDevices makes a driver for every device of the project and checks
// its config. Every error is reported, each naming the device and the line.
// OPC UA devices get their trust store under <dataDir>/pki unless their
// config names one (DESIGN.md, Data directory).
func BuildDevices(p *config.Project, dataDir string, log *slog.Logger) (map[string]device.Driver, error) {
	devs := map[string]device.Driver{}
	var errs []error
	for _, dc := range p.Devices {
		if _, dup := devs[dc.Name]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: device %q defined twice", p.File, dc.Line, dc.Name))
			continue
		}
		f, ok := device.Lookup(dc.Driver)
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: device %q: unknown driver %q (have %v)", p.File, dc.Line, dc.Name, dc.Driver, device.Drivers()))
			continue
		}
		raw := dc.Raw
		if dc.Driver == "opcua" {
			raw = withDefaultKey(raw, "pki_dir", filepath.Join(dataDir, "pki"))
		}
		d, err := f(device.Config{Name: dc.Name, Raw: raw, Logger: log.With("device", dc.Name)})
		if err == nil {
			err = d.Validate()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: device %q: %w", p.File, dc.Line, dc.Name, err))
			continue
		}
		devs[dc.Name] = d
	}
	return devs, errors.Join(errs...)
}

func (s *System) buildEngine() error {
	eng, devs, err := s.newEngine(s.Project())
	if err != nil {
		return err
	}
	last, err := s.DB.LoadLastValues()
	if err != nil {
		return err
	}
	eng.Seed(last)
	s.devices = devs
	s.engine.Store(eng)
	return nil
}

// newEngine builds the drivers and the tag engine of p (not started).
func (s *System) newEngine(p *config.Project) (*tagengine.Engine, map[string]device.Driver, error) {
	devs, err := BuildDevices(p, s.Config.DataDir, s.Log)
	if err != nil {
		return nil, nil, err
	}
	tags, err := p.EngineTags()
	if err != nil {
		return nil, nil, err
	}
	if err := checkTags(p, devs); err != nil {
		return nil, nil, err
	}
	tags = s.resolved.applyResolved(s.DB, devs, tags, s.Log) // ns= addresses converted at an earlier start
	base, _ := auth.ParseLevel(s.Config.Security.BaselineWriteLevel)
	eng, err := tagengine.New(tagengine.Config{
		Baseline:   base,
		LastValues: s.DB,
		Audit:      auditSink{s},
		Logger:     s.Log.With("subsystem", "tagengine"),
	}, devs, tags)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.File, err)
	}
	return eng, devs, nil
}

// bootstrap writes the one-time bootstrap token on an empty store (no API
// key, no bootstrap hash, never provisioned) and re-arms an existing one.
func (s *System) bootstrap() error {
	h, err := s.DB.Meta(metaBootstrapHash)
	if err != nil {
		return err
	}
	if h != nil {
		if len(h) > 0 {
			s.Keys.SetBootstrapHash(h)
		}
		return nil
	}
	keys, err := s.DB.APIKeys()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		return nil
	}
	tok, hash, err := auth.NewBootstrapToken()
	if err != nil {
		return err
	}
	path := filepath.Join(s.Config.DataDir, BootstrapTokenFile)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := s.DB.PutMeta(metaBootstrapHash, hash); err != nil {
		return err
	}
	s.Keys.SetBootstrapHash(hash)
	s.Log.Warn("first start: one-time bootstrap token written; use it to create API keys, then provision", slog.String("file", path))
	return nil
}

// Run starts the subsystems (tag engine, script workers, API listener),
// tells systemd it is ready, keeps the watchdog fed while the scan loops and
// the API make progress, and blocks until ctx ends; then it stops everything
// in reverse order.
func (s *System) Run(ctx context.Context) error {
	defer s.close(context.Background())
	ln, err := net.Listen("tcp", s.Config.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", s.Config.HTTP.Listen, err)
	}
	s.startChangeProbe(ctx) // only with QUBIQ_DEBUG_CHANGES_FILE set (probe.go; benchmarks)
	if err := s.Engine().Start(ctx); err != nil {
		ln.Close()
		return err
	}
	s.Data.Start(ctx)
	s.resolved.start(ctx, s.DB, resolvedWatchEvery, s.Log) // store ns= addresses once converted
	if err := s.Scripts.start(ctx); err != nil {
		ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- s.API.Serve(ctx, ln) }()
	s.Log.Info("qubiqd ready", slog.String("version", Version), slog.String("listen", ln.Addr().String()),
		slog.String("data_dir", s.Config.DataDir), slog.Int("tags", len(s.Engine().Tags(auth.Full("", "", "")))))
	systemd.Ready()
	go systemd.RunWatchdog(ctx, s.alive, s.Log)
	select {
	case <-ctx.Done():
		systemd.Stopping()
		s.Log.Info("qubiqd stopping")
		return <-errc
	case err := <-errc:
		return err
	}
}

// alive reports whether the scan loops completed a scan within maxAge.
func (s *System) alive(maxAge time.Duration) error {
	eng := s.Engine()
	if eng == nil {
		return nil // stopping
	}
	if len(s.Project().Tags) > 0 && time.Since(eng.Progress()) > maxAge {
		return fmt.Errorf("no scan completed for %s", time.Since(eng.Progress()).Round(time.Second))
	}
	return nil
}

func (s *System) close(ctx context.Context) {
	s.applyMu.Lock() // a project import in flight finishes first
	defer s.applyMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.Scripts != nil {
		s.Scripts.close(ctx)
	}
	if s.Data != nil {
		s.Data.Close(ctx)
		s.Data = nil
	}
	s.resolved.stop()
	if eng := s.engine.Swap(nil); eng != nil {
		if err := eng.Stop(ctx); err != nil {
			s.Log.Error("stop tag engine", slog.Any("err", err))
		}
	}
	if s.Audit != nil {
		if err := s.Audit.Close(ctx); err != nil {
			s.Log.Error("close audit log", slog.Any("err", err))
		}
		s.Audit = nil
	}
	if s.DB != nil {
		if err := s.DB.Close(); err != nil {
			s.Log.Error("close store", slog.Any("err", err))
		}
		s.DB = nil
	}
}

// withDefaultKey returns the JSON object raw with key set to val when raw
// does not have it; raw is returned unchanged when it is not an object.
func withDefaultKey(raw json.RawMessage, key string, val any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return raw
		}
	}
	if _, ok := m[key]; ok {
		return raw
	}
	b, err := json.Marshal(val)
	if err != nil {
		return raw
	}
	m[key] = b
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}
