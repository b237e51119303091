// Package daemon is the wiring of qubiqd, and only that (like tailscale's
// tsd.System): it builds every part from the configuration, starts the
// parts in order, stops them in reverse, and stops the parts already
// started when a later one fails (parts.go). Behaviour lives in the parts:
// the store, the service layer (gateway/service, with the OPC UA extras of
// opcuastore), the REST API and LiveView (api). Each part parses and
// validates its own section of the config and the project; Check runs all
// of them for --check-config.
//
// Only cmd/qubiqd imports daemon.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"qubiq.dev/edge/alarm"
	"qubiq.dev/edge/api"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/flow"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/gateway/appliance"
	"qubiq.dev/edge/gateway/service"
	"qubiq.dev/edge/internal/probe"
	"qubiq.dev/edge/mqtt"
	"qubiq.dev/edge/opcuastore"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/systemd"
)

// Version is the daemon's version, set at build time with
// -ldflags "-X qubiq.dev/edge/daemon.Version=...".
var Version = "0.1.0-dev"

// System is the running daemon: its parts, built by New, run by Run.
type System struct {
	cfg      *config.Daemon
	log      *slog.Logger
	level    *slog.LevelVar
	settings appliance.Settings

	appliance *appliance.Appliance
	restart   chan string // a staged bundle or restore asks for a restart
	tlsOn     bool

	db    *store.DB
	audit *store.AuditLog
	svc   *service.Service
	flows *flow.Engine
	api   *api.Server

	mqtt   *mqtt.Link    // nil when mqtt.brokers is empty
	outbox *store.Outbox // the link's
	ln     net.Listener

	parts     lifecycle
	served    chan error // the API's Serve result
	stopServe context.CancelFunc
	serveErr  error // what Serve returned, once stopped

	diag diagnostics // the metrics and the diagnostics listener (diagnostics.go)
}

// New builds the system from cfg: it restores a staged backup into the
// data directory, opens the store (bounded by store.open_timeout) and its
// audit log, builds the service layer (the project, drivers, tag engine,
// data services, users, sandbox pool), the appliance's operations
// (firmware, backup, log level: level is the logger's, changed at run
// time), the flow engine over it, and the API with its LiveView panels
// and TLS. Nothing runs until Run. On error every part built so far is
// closed again, in reverse.
func New(ctx context.Context, cfg *config.Daemon, log *slog.Logger, level *slog.LevelVar) (*System, error) {
	settings, err := appliance.ParseSettings(cfg)
	if err != nil {
		return nil, err
	}
	if level == nil {
		level = new(slog.LevelVar)
	}
	s := &System{cfg: cfg, log: log, level: level, settings: settings, parts: lifecycle{log: log}}
	err = s.parts.start(ctx,
		part{name: "restore", start: s.applyRestore},
		part{name: "store", start: s.openStore, stop: s.closeStore},
		part{name: "service", start: s.buildService, stop: func(ctx context.Context) error { s.svc.Close(ctx); return nil }},
		part{name: "appliance", start: s.buildAppliance},
		part{name: "mqtt", start: s.buildMQTT},
		part{name: "flows", start: s.buildFlows},
		part{name: "metrics", start: s.buildMetrics},
		part{name: "api", start: s.buildAPI},
	)
	if err != nil {
		return nil, err
	}
	for _, w := range configWarnings(cfg, s.parts.partNames()) {
		s.svc.Warn(w)
	}
	return s, nil
}

func (s *System) openStore(context.Context) error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", s.cfg.DataDir, err)
	}
	db, err := store.Open(filepath.Join(s.cfg.DataDir, store.FileName), store.Options{Timeout: s.cfg.Store.OpenTimeout.D(),
		Logger: s.log.With("subsystem", "store")})
	if err != nil {
		return s.explainStore(err)
	}
	s.db = db
	s.audit = store.NewAuditLog(db, store.AuditOptions{}, s.log.With("subsystem", "audit"))
	return nil
}

func (s *System) closeStore(ctx context.Context) error {
	if err := s.audit.Close(ctx); err != nil {
		s.log.Error("close audit log", slog.Any("err", err))
	}
	return s.db.Close()
}

func (s *System) buildService(context.Context) error {
	base, err := auth.ParseLevel(s.cfg.Security.BaselineWriteLevel)
	if err != nil {
		return fmt.Errorf("security.baseline_write_level: %w", err)
	}
	alarms, err := alarm.ParseSettings(&s.cfg.Alarms)
	if err != nil {
		return fmt.Errorf("%s: %w", s.cfg.File, err)
	}
	ret := s.cfg.History.Retention
	s.svc, err = service.New(service.Options{
		DataDir:         s.cfg.DataDir,
		ProjectFile:     s.cfg.Project,
		Baseline:        base,
		LastValuesEvery: s.cfg.Store.LastValuesEvery.D(),
		HistoryMaxAge:   ret.MaxAge.D(),
		HistoryMaxBytes: int64(ret.MaxBytes),
		Sandbox:         sandboxConfig(s.cfg),
		Version:         Version,
		Store:           s.db,
		Audit:           s.audit,
		Log:             s.log,
		DeviceDefaults:  opcuastore.Defaults(s.cfg.DataDir),
		Addresses:       opcuastore.NewAddresses(s.db, s.log.With("subsystem", "opcua")),
		Certs:           opcuastore.Certs{DataDir: s.cfg.DataDir},
		SectionChecks:   []func(*config.Project) error{checkViews, checkFlows(s.cfg), checkMQTT(s.cfg)},
		GrantChecks:     []func(auth.Grant, *config.Project) error{coverFlows},
		Alarms:          alarms,
	})
	return err
}

func (s *System) buildAPI(context.Context) error {
	p := s.svc.Project()
	views, err := parseViews(p)
	if err != nil {
		return err
	}
	panels := api.Panels{Views: views, Entries: map[string][]string{}}
	for _, sc := range p.Scripts {
		panels.Entries[sc.Module] = sc.LiveView
	}
	if os.Getenv(auth.EscapeHatchEnv) == "off" {
		panels.EscapeHatch = true
		s.svc.Warn("escape hatch on (" + auth.EscapeHatchEnv + "=off): scripts started from LiveView panels run unrestricted; every such run is audited")
	}
	c := s.cfg
	tlsConf, tlsInfo, err := api.TLSConfig(c.HTTP.TLS, c.File, c.DataDir, c.HTTP.Listen, c.ApplianceID, s.log)
	if err != nil {
		return err
	}
	deps := api.DepsFrom(s.svc, panels)
	deps.TLS = tlsInfo
	deps.Flows = s.flows
	deps.Metrics = s.diag.metrics
	deps.Appliance = s.appliance
	s.tlsOn = tlsConf != nil
	s.api, err = api.New(api.Config{Addr: c.HTTP.Listen, TLS: tlsConf}, deps, s.log.With("subsystem", "api"))
	return err
}

// Run starts the parts in order (the HTTP listener first, so a taken port
// fails before anything else runs; the change probe when asked for; then
// the service's steps: alarms, tag engine, history feed, address watch,
// sandbox (its workers start in the background: runs wait for them),
// session sweep; the flows; serving the API last), tells systemd it is
// ready (READY=1 with a STATUS= summary, refreshed once the sandbox's
// workers are up or failed), applies the memory limit, keeps the watchdog fed
// while the scan loops and the API make progress, confirms a trial slot
// after its healthy period, and blocks until ctx ends (STOPPING=1), the
// API fails, a staged bundle or restore asks for a restart (the error's
// RestartExitCode is 75) or the trial fails; then it stops every part in
// reverse. A part that fails to start stops the ones started before it,
// and Run returns its error.
func (s *System) Run(ctx context.Context) error {
	parts := []part{
		{name: "http listener", start: s.listen, stop: s.closeListener},
		{name: "diagnostics listener", start: s.startDiagnostics, stop: s.stopDiagnostics},
		{name: "change probe", start: func(ctx context.Context) error { // before the scans: it sees every change
			probe.Start(ctx, os.Getenv(probe.Env), s.subscribeAll, s.log)
			return nil
		}},
	}
	for _, st := range s.svc.Steps() {
		parts = append(parts, part{name: st.Name, start: st.Start, stop: st.Stop})
	}
	// The supervisor link after the tag engine and the sandbox its
	// commands reach; the flows after them (and the link, which they
	// publish on), stopped before them.
	parts = append(parts, s.mqttParts()...)
	parts = append(parts, part{name: "flows", start: s.flows.Start, stop: s.flows.Stop})
	parts = append(parts, part{name: "api", start: s.serve, stop: s.awaitServe})
	if err := s.parts.start(ctx, parts...); err != nil {
		s.stop()
		return err
	}
	base := "http://" + s.ln.Addr().String()
	if s.tlsOn {
		base = "https://" + s.ln.Addr().String()
	}
	s.log.Info("qubiqd ready", slog.String("version", Version), slog.String("listen", s.ln.Addr().String()),
		slog.String("liveview", base+"/liveview/"), slog.String("console", base+"/console/"),
		slog.String("data_dir", s.cfg.DataDir), slog.Int("tags", s.svc.TagCount()))
	systemd.ReadyStatus(s.statusLine())
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the sandbox warms after READY: STATUS= then says how it ended
		select {
		case <-s.svc.Warmed():
			systemd.Status(s.statusLine())
		case <-rctx.Done():
		}
	}()
	s.startMemoryLimit(rctx) // after the start-up's own peak: auto follows the running heap
	s.startSettle(rctx)      // the start-up's leftovers: decoded tags, executable pages
	wd := s.watchdog()
	go func() { _ = wd.Run(rctx) }()
	trialFailed := make(chan error, 1)
	go s.runTrial(rctx, wd, trialFailed)
	var err error
	select {
	case <-ctx.Done():
		systemd.Stopping()
		s.log.Info("qubiqd stopping")
	case err = <-s.served:
		s.served <- err // awaitServe reads it
	case reason := <-s.restart:
		systemd.Notify(systemd.StateStopping, "STATUS="+reason)
		s.log.Info("qubiqd stopping to be restarted", slog.String("reason", reason))
		err = &restartError{reason: reason}
	case terr := <-trialFailed:
		systemd.Notify(systemd.StateStopping, "STATUS=trial failed")
		s.log.Error("firmware trial failed; exiting for systemd to restart (qubiq-slot counts the start and rolls back past the limit)",
			slog.Any("err", terr))
		err = terr
	}
	cancel()
	s.stop()
	if err != nil {
		return err
	}
	return s.serveErr
}

// stop stops every part in reverse, within stopTimeout.
func (s *System) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	s.parts.stop(ctx)
}

func (s *System) listen(context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", s.cfg.HTTP.Listen, err)
	}
	s.ln = ln
	return nil
}

// closeListener closes the listener when serving never started (Serve
// closes it otherwise).
func (s *System) closeListener(context.Context) error {
	if s.served == nil {
		return s.ln.Close()
	}
	return nil
}

// serve serves the API on the listener until the part stops.
func (s *System) serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.served = make(chan error, 1)
	s.stopServe = cancel
	go func() { s.served <- s.api.Serve(sctx, s.ln) }()
	return nil
}

// awaitServe ends serving (graceful: the requests in flight finish, within
// the API's shutdown timeout) and returns Serve's error.
func (s *System) awaitServe(ctx context.Context) error {
	s.stopServe()
	select {
	case s.serveErr = <-s.served:
	case <-ctx.Done():
		s.serveErr = ctx.Err()
	}
	return s.serveErr
}

// subscribeAll feeds the change probe every change of the tag engine.
func (s *System) subscribeAll(buf int) (<-chan gateway.TagValue, func() uint64, func()) {
	return s.svc.SubscribeValues(auth.Full("probe", auth.RealmPlatform, "probe"), buf)
}

// stopTimeout bounds stopping the parts at the end of Run.
const stopTimeout = 10 * time.Second
