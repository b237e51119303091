package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/alarm"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/tagengine"
)

// Options are what the daemon gives the service: where the data lives,
// the config values the operations need, the store and its audit log
// (opened by the daemon, closed after the service), and the device
// extras.
type Options struct {
	// DataDir is the daemon's data dir (files/, local.sqlite,
	// secrets.key, bootstrap-token, python-packages, pki/).
	DataDir string
	// ProjectFile is the config's project file: imported at every start
	// (upsert) and rewritten by each project import, atomically. Empty:
	// the store alone holds the project.
	ProjectFile string
	// Baseline is security.baseline_write_level: the write level of tags
	// that name none.
	Baseline auth.Level
	// LastValuesEvery is store.last_values_every: how often the tags'
	// last values are persisted (tagengine.DefaultFlushEvery when zero).
	LastValuesEvery time.Duration
	// HistoryMaxAge and HistoryMaxBytes are history.retention.
	HistoryMaxAge   time.Duration
	HistoryMaxBytes int64
	// Sandbox configures the script workers (python.*).
	Sandbox sandbox.Config
	// Version is the daemon's version, for health.
	Version string

	// Store and Audit are the open store and its audit log.
	Store *store.DB
	Audit *store.AuditLog
	// Log receives the service's log, with a "subsystem" attribute per
	// part.
	Log *slog.Logger

	// DeviceDefaults, when set, completes a device's driver keys before
	// its driver is built (an OPC UA device's pki_dir in the data dir).
	DeviceDefaults func(driver string, raw json.RawMessage) json.RawMessage
	// Addresses, when set, keeps the device addresses a driver converts
	// at its first connection (OPC UA ns= to nsu=) across starts.
	Addresses AddressBook
	// Certs, when set, are the certificate stores of the devices whose
	// driver has one (OPC UA); without it the certificate operations
	// answer that no device has a store.
	Certs CertStores
	// SectionChecks validate the project sections other parts own (the
	// LiveView views, the flows): a project import is refused on their
	// problems too.
	SectionChecks []func(p *config.Project) error
	// GrantChecks refuse a project import by g whose sections would grant
	// more than g holds (a flow's grant: auth.Grant.Covers); the error is
	// an *auth.DeniedError.
	GrantChecks []func(g auth.Grant, p *config.Project) error
	// Alarms are the daemon config's alarm settings (journal retention,
	// chattering rule, longest shelve).
	Alarms alarm.Settings
}

// AddressBook keeps the addresses a driver converts at its first
// connection (an OPC UA ns= address to the nsu= form), so the next start
// builds the tags with them. The daemon passes opcuastore's.
type AddressBook interface {
	// Apply rewrites, in tags (changed in place and returned), the
	// addresses converted at an earlier start that the project still
	// names, and notes which are still waiting for a conversion.
	Apply(devs map[string]device.Driver, tags []tagengine.Tag) []tagengine.Tag
	// Shown returns the converted address of a tag converted since the
	// start (listed instead of the project's).
	Shown(path string) (string, bool)
	// Watch stores the conversions as the drivers make them, until ctx
	// ends, none waits, or Stop; a running watch is replaced.
	Watch(ctx context.Context)
	// Stop ends the watch and waits for it.
	Stop()
}

// CertStores are the certificate stores of devices whose driver has one
// (OPC UA). The daemon passes opcuastore's.
type CertStores interface {
	// Dir returns a device's certificate store directory; ok is false
	// when its driver has none.
	Dir(dc config.DeviceConfig) (dir string, ok bool, err error)
	// List lists a store: its servers' certificates trusted and rejected
	// and qubiqd's own, sorted by status then subject (Device unset).
	List(dir string) ([]gateway.DeviceCert, error)
	// Trust moves a certificate from rejected to trusted and wakes the
	// drivers waiting for it; a thumbprint the store lacks wraps
	// gateway.ErrNotFound.
	Trust(dir, thumbprint string) error
	// Reject moves a certificate from trusted to rejected.
	Reject(dir, thumbprint string) error
}

// Service is the service layer: it implements gateway.Gateway and the
// sandbox's Services. Build it with New, start it with the daemon's parts
// (Steps), and Close it after the last step stopped. It is safe for
// concurrent use.
type Service struct {
	opts    Options
	log     *slog.Logger
	db      *store.DB
	audit   *store.AuditLog
	started time.Time
	warns   warnings // health warnings (warnings.go)
	// warmStop ends the sandbox's warm-up and waits for it (scripts.go).
	warmStop func()
	warmed   chan struct{}

	mqttMu  sync.Mutex // guards mqttSrc
	mqttSrc gateway.MQTTHealthSource

	keys     *auth.Keys
	users    *auth.Users
	sessions *auth.Sessions

	// The project and the tag engine are replaced as a whole by a
	// project import (project.go); read them at each use.
	project atomic.Pointer[runningProject] // projecttags.go
	engine  atomic.Pointer[tagengine.Engine]
	applyMu sync.Mutex // serialises project imports

	data   *data         // vars, history, files, SQL, message handlers (data.go)
	alarms *alarm.Engine // the project's alarms (alarms.go)
	pool   *sandbox.Pool // the script workers (scripts.go)
	// flows are the flow engine's hooks: the message triggers and the
	// flows' health (nodes.go).
	flows flowHooks
	// runner runs nested entries (message.send, runOnGateway); nil: the
	// service's own RunScript. Tests replace it.
	runner func(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (gateway.ScriptRun, error)
	// refusals aggregates refused credentials into audit records
	// (refusals.go).
	refusals *credentialRefusals
}

var _ gateway.Gateway = (*Service)(nil)

// New builds the service: the project (the config's project file, kept in
// the store, else the stored one), the drivers and the tag engine seeded
// with the last values, users and sessions (seeding the project's users),
// the bootstrap token on an empty store, the data services with the
// project's connections, named queries and message handlers, and the
// sandbox pool. Nothing runs until the Steps start. Every project problem is
// reported, naming the file and line. On error what was opened is closed.
func New(opts Options) (_ *Service, err error) {
	if opts.Store == nil {
		return nil, errors.New("service: no store")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts, log: opts.Log, db: opts.Store, audit: opts.Audit, started: time.Now()}
	s.refusals = newCredentialRefusals(s.enqueue)
	defer func() {
		if err != nil {
			s.Close(context.Background())
		}
	}()
	s.keys = auth.NewKeys(s.db.AuthKeyStore())
	if err := s.loadProject(); err != nil {
		return nil, err
	}
	if err := s.buildEngine(); err != nil {
		return nil, err
	}
	if err := s.buildAlarms(); err != nil {
		return nil, err
	}
	if err := s.initAccess(); err != nil {
		return nil, err
	}
	if s.data, err = openData(s); err != nil {
		return nil, err
	}
	if err := s.newPool(); err != nil {
		return nil, err
	}
	return s, nil
}

// Step is one part of the service, started in order and stopped in
// reverse by the daemon.
type Step struct {
	Name  string
	Start func(ctx context.Context) error
	Stop  func(ctx context.Context) error
}

// Steps are the service's parts in start order: the alarms (their tag
// subscription is taken before the scans start, so they see every first
// value), the tag engine (scan loops), the history feed (the engine's changes into history), the
// address watch (converted OPC UA addresses into the store), the sandbox
// (workers, then the stored and the project's scripts), and the session
// sweep (ended sessions close their WebSockets).
func (s *Service) Steps() []Step {
	var sweep stopper
	return []Step{
		{Name: "alarms", Start: s.alarms.Start, Stop: s.alarms.Stop},
		{Name: "tag engine", Start: func(ctx context.Context) error { return s.Engine().Start(ctx) },
			Stop: func(ctx context.Context) error {
				if eng := s.Engine(); eng != nil {
					return eng.Stop(ctx)
				}
				return nil
			}},
		{Name: "history feed", Start: func(ctx context.Context) error { s.data.startFeed(); return nil },
			Stop: func(context.Context) error { s.data.stopFeed(); return nil }},
		{Name: "address watch", Start: func(ctx context.Context) error {
			if s.opts.Addresses != nil {
				s.opts.Addresses.Watch(ctx)
			}
			return nil
		}, Stop: func(context.Context) error {
			if s.opts.Addresses != nil {
				s.opts.Addresses.Stop()
			}
			return nil
		}},
		{Name: "sandbox", Start: s.startScripts, Stop: s.stopScripts},
		{Name: "session sweep", Start: func(ctx context.Context) error { sweep.start(ctx, s.sweepSessions); return nil },
			Stop: func(context.Context) error { sweep.stop(); return nil }},
	}
}

// Close closes what New opened: history (folding its journal), vars, the
// SQL connections (rolling back open transactions) and the files root. A
// project import in flight finishes first. The store and the audit log are
// the daemon's.
func (s *Service) Close(ctx context.Context) {
	s.refusals.flush()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.data != nil {
		s.data.close(ctx)
		s.data = nil
	}
}

// Engine returns the running tag engine; an import replaces it.
func (s *Service) Engine() *tagengine.Engine { return s.engine.Load() }

// Alive reports (nil) whether the scan loops completed a scan within
// maxAge (the systemd watchdog feeds on it); a project without tags is
// always alive.
func (s *Service) Alive(maxAge time.Duration) error {
	eng := s.Engine()
	if eng == nil {
		return nil
	}
	if s.TagCount() > 0 && time.Since(eng.Progress()) > maxAge {
		return fmt.Errorf("no scan completed for %s", time.Since(eng.Progress()).Round(time.Second))
	}
	return nil
}

// filesDir is system.files' root in the data dir.
func (s *Service) filesDir() string { return filepath.Join(s.opts.DataDir, "files") }

// stopper runs one background loop until stop.
type stopper struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (st *stopper) start(ctx context.Context, loop func(ctx context.Context)) {
	ctx, st.cancel = context.WithCancel(context.WithoutCancel(ctx))
	st.done = make(chan struct{})
	go func() {
		defer close(st.done)
		loop(ctx)
	}()
}

func (st *stopper) stop() {
	if st.cancel != nil {
		st.cancel()
		<-st.done
		st.cancel = nil
	}
}
