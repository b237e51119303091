package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// RealmFlow is the realm of a flow's grant: its principal is
// "flow:<name>", its origin the same.
const RealmFlow auth.Realm = "flow"

// tagFeed is the buffer of the engine's one subscription to the tag
// engine's changes (shared by every tag trigger).
const tagFeed = 65536

// defaultBatch is how many queued messages one pass takes through a flow
// (and one Python node call carries at most: gateway.MaxNodeBatch).
const defaultBatch = 256

// Options are what the daemon gives the engine.
type Options struct {
	// Gateway is the service layer; Store keeps the flows' versions.
	Gateway Gateway
	Store   Store
	// Topics, Publisher and Alarms are the supervisor link and the alarm
	// part, when they exist (nil: mqtt triggers, mqtt_publish nodes and
	// alarm triggers are refused, for MQTTWhy / AlarmsWhy).
	Topics    TopicSource
	Publisher Publisher
	Alarms    AlarmSource
	MQTTWhy   string
	AlarmsWhy string
	// ProjectFile and ProjectFlows are the project file and its flows:
	// entries, loaded at Start: a flow whose definition differs from its
	// stored latest version is saved as a new version. ProjectDir is
	// where file: of a Python node resolves. Handlers are the project's
	// message handlers.
	ProjectFile  string
	ProjectDir   string
	ProjectFlows []yaml.Node
	Handlers     []string
	// Log receives the engine's log.
	Log *slog.Logger
	// Batch is the most messages one pass takes (0: 256).
	Batch int
	// Now is the clock of timer triggers (nil: time.Now).
	Now func() time.Time
}

// Engine runs the flows. Build it with New, Start it after the service
// layer's steps, Stop it before them. It implements gateway.Flows,
// gateway.MessageSink and gateway.FlowHealthSource. Its methods are safe
// for concurrent use.
type Engine struct {
	opts Options
	gw   Gateway
	log  *slog.Logger

	adminMu sync.Mutex // saves (but their wait for a running batch: flowState.installMu), rollbacks, deletions, resets, start and stop
	mu      sync.RWMutex
	flows   map[string]*flowState
	ctx     context.Context
	cancel  context.CancelFunc
	started bool

	// The shared tag feed: routes by path, rebuilt when flows change;
	// the subscription behind it is held while the engine runs and some
	// route exists (under feedMu; triggers.go).
	routes   atomic.Pointer[map[string][]*tagRoute]
	feedMu   sync.Mutex
	feedOn   bool
	feedStop func()
	feedDone chan struct{}
	feedLost func() uint64 // the current subscription's count, nil without one
	feedGone uint64        // what the ended subscriptions lost
	prevMu   sync.Mutex
	prev     map[string]gateway.TagValue // the last change of each trigger tag

	gen atomic.Int64 // preparations of Python nodes (their modules' versions)
}

var (
	_ gateway.Flows            = (*Engine)(nil)
	_ gateway.MessageSink      = (*Engine)(nil)
	_ gateway.FlowHealthSource = (*Engine)(nil)
)

// New returns an engine; nothing runs until Start.
func New(opts Options) (*Engine, error) {
	if opts.Gateway == nil || opts.Store == nil {
		return nil, errors.New("flow: New needs a Gateway and a Store")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Batch <= 0 {
		opts.Batch = defaultBatch
	}
	opts.Batch = min(opts.Batch, gateway.MaxNodeBatch)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Engine{opts: opts, gw: opts.Gateway, log: opts.Log, flows: map[string]*flowState{}, prev: map[string]gateway.TagValue{}}
	empty := map[string][]*tagRoute{}
	e.routes.Store(&empty)
	return e, nil
}

// engineGrant is the engine's own grant: it reads every tag (the shared
// feed, the project's tags for checks) and saves project flows.
var engineGrant = auth.Full("flow-engine", auth.RealmPlatform, "flows")

// record is a stored flow version.
type record struct {
	Doc   string    `json:"doc"`
	Saved time.Time `json:"saved"`
	By    string    `json:"by"`
}

// projectFlowLoaded reports whether the project file's definition doc of
// flow name was already loaded, so Start keeps the flow's latest version
// (a push since stays across restarts, docs/flows.md, "Versions"): the
// newest version the project saved has doc; without one, any version has
// it.
func (e *Engine) projectFlowLoaded(name, doc string) (bool, error) {
	_, recs, err := e.opts.Store.FlowVersions(name)
	if err != nil {
		return false, err
	}
	seen := false
	for i := len(recs) - 1; i >= 0; i-- {
		var r record
		if json.Unmarshal(recs[i], &r) != nil {
			continue
		}
		if r.By == "project" {
			return r.Doc == doc, nil
		}
		seen = seen || r.Doc == doc
	}
	return seen, nil
}

// env is what flows are checked against now: the running project's tags
// and saved scripts, the project's message handlers, the links.
func (e *Engine) env(ctx context.Context) Env {
	env := Env{Dir: "", Tags: map[string]TagFacts{}, Scripts: map[string][]string{}, Handlers: e.opts.Handlers,
		MQTT: e.opts.Topics != nil && e.opts.Publisher != nil, MQTTWhy: e.opts.MQTTWhy,
		Alarms: e.opts.Alarms != nil, AlarmsWhy: e.opts.AlarmsWhy}
	for _, t := range e.gw.ListTags(ctx, engineGrant) {
		env.Tags[t.Path] = TagFacts{ReadOnly: t.ReadOnly, WriteLevel: t.WriteLevel}
	}
	if scripts, err := e.gw.ListScripts(ctx, engineGrant); err == nil {
		for _, s := range scripts {
			for _, en := range s.Entries {
				env.Scripts[s.Module] = append(env.Scripts[s.Module], en.Name)
			}
		}
	} else {
		env.Scripts = nil
	}
	return env
}

// Start loads the project's flows (saving those that changed as new
// versions), then starts every stored flow: its Python nodes checked and
// registered, its trigger, its queue. A project flow with a problem fails
// the start, naming the file and line; a stored flow that no longer fits
// the project (a tag it names is gone) is stopped, and health says why.
func (e *Engine) Start(ctx context.Context) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if e.started {
		return errors.New("flow: Start called twice")
	}
	e.ctx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	env := e.env(ctx)
	penv := env
	penv.Dir = e.opts.ProjectDir
	defs, err := ParseSection(e.opts.ProjectFile, e.opts.ProjectFlows, penv)
	if err != nil {
		e.cancel()
		return err
	}
	for _, d := range defs {
		loaded, err := e.projectFlowLoaded(d.Name, string(d.Doc))
		if err != nil {
			e.cancel()
			return err
		}
		if loaded {
			continue
		}
		if _, err := e.store(d.Name, 0, d.Doc, "project"); err != nil {
			e.cancel()
			return err
		}
		e.log.Info("project flow saved as a new version", slog.String("flow", d.Name))
	}
	names, versions, recs, err := e.opts.Store.LatestFlows()
	if err != nil {
		e.cancel()
		return err
	}
	e.started = true
	e.feedMu.Lock()
	e.feedOn = true // subscribed by rebuildRoutes once a tag trigger runs
	e.feedMu.Unlock()
	for i, name := range names {
		fs := e.state(name)
		var r record
		if err := json.Unmarshal(recs[i], &r); err != nil {
			fs.stopped(int64(versions[i]), nil, fmt.Sprintf("stored version %d unreadable: %v", versions[i], err))
			continue
		}
		d, err := ParseDoc(name, []byte(r.Doc), env)
		if err != nil {
			fs.stopped(int64(versions[i]), nil, "no longer fits the project: "+firstLine(err))
			e.log.Error("flow not started", slog.String("flow", name), slog.Any("err", err))
			continue
		}
		if err := e.messageTaken(d); err != nil { // stored before the rule: the first by name keeps it
			fs.stopped(int64(versions[i]), d, strings.TrimPrefix(err.Error(), gateway.ErrConflict.Error()+": "))
			e.log.Error("flow not started", slog.String("flow", name), slog.Any("err", err))
			continue
		}
		if _, err := e.run(ctx, fs, d, int64(versions[i])); err != nil {
			e.log.Error("flow not started", slog.String("flow", name), slog.Any("err", err))
		}
	}
	e.rebuildRoutes()
	e.log.Info("flows started", slog.Int("flows", len(names)))
	return nil
}

// Stop stops every flow (its trigger first, then the batch it is running,
// within ctx) and the tag feed. Queued messages are dropped (the daemon is
// stopping; they are counted in the log).
func (e *Engine) Stop(ctx context.Context) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if !e.started {
		return nil
	}
	e.started = false
	e.stopFeed()
	e.mu.RLock()
	all := make([]*flowState, 0, len(e.flows))
	for _, fs := range e.flows {
		all = append(all, fs)
	}
	e.mu.RUnlock()
	lost := 0
	for _, fs := range all {
		fs.installMu.Lock() // a save installing a version finishes first
		if in := fs.current(); in != nil {
			in.stop(ctx, false)
		}
		fs.installMu.Unlock()
		n, _ := fs.q.len()
		lost += n
	}
	e.cancel()
	if lost > 0 {
		e.log.Warn("flows stopped with messages queued; they are not run", slog.Int("messages", lost))
	}
	return nil
}

// state returns the state of the flow name, made on first use.
func (e *Engine) state(name string) *flowState {
	e.mu.Lock()
	defer e.mu.Unlock()
	fs := e.flows[name]
	if fs == nil {
		fs = &flowState{e: e, name: name, q: newMsgQueue(DefaultQueue, DropOldest)}
		e.flows[name] = fs
	}
	return fs
}

func (e *Engine) lookup(name string) *flowState {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.flows[name]
}

// store saves doc as a version of name, recorded as saved by by.
func (e *Engine) store(name string, version int64, doc []byte, by string) (int64, error) {
	rec, err := json.Marshal(record{Doc: string(doc), Saved: time.Now().UTC(), By: by})
	if err != nil {
		return 0, err
	}
	v, stale, err := e.opts.Store.SaveFlowVersion(name, int(version), rec)
	if err != nil {
		return 0, err
	}
	if stale {
		return 0, fmt.Errorf("%w: flow %s: version %d is not above the flow's latest; nothing saved", gateway.ErrConflict, name, version)
	}
	return int64(v), nil
}

// grantOf is the grant a flow runs with.
func grantOf(d *Def) auth.Grant {
	g := d.Grant
	g.Principal, g.Realm, g.Origin = "flow:"+d.Name, RealmFlow, "flow:"+d.Name
	g.Permissions = nil
	return g
}

// run prepares d's Python nodes and makes it the running version of fs
// (install). On a failed preparation fs keeps running what it ran (or, at
// start, is stopped with the reason) and the error says why.
func (e *Engine) run(ctx context.Context, fs *flowState, d *Def, version int64) (dropped int, err error) {
	in, err := e.prepare(ctx, d, version)
	if err != nil {
		if fs.current() == nil {
			fs.stopped(version, d, firstLine(err))
		}
		return 0, err
	}
	return e.install(ctx, fs, in)
}

// install makes the prepared in the running version of fs, replacing the
// one running (which finishes its batch first and leaves its queued
// messages to in). It returns how many queued messages in could not take
// (its queue is smaller).
func (e *Engine) install(ctx context.Context, fs *flowState, in *instance) (dropped int, err error) {
	if old := fs.current(); old != nil {
		e.log.Info("flow: a new version waits for the running one to finish its batch", slog.String("flow", fs.name),
			slog.Int64("running", old.version), slog.Int64("next", in.version))
		old.stop(ctx, true)
		old.release()
	}
	d := in.def
	in.fs = fs
	dropped = fs.q.resize(d.QueueSize, d.Overflow)
	if dropped > 0 {
		fs.ctr.dropped.Add(uint64(dropped))
	}
	fs.install(in)
	if err := in.start(); err != nil {
		in.stop(ctx, false)
		in.release()
		fs.stopped(in.version, d, err.Error())
		return dropped, err
	}
	return dropped, nil
}

// prepare checks and registers d's Python nodes, each under a module of
// its own for this preparation (so the version running and the one
// replacing it never share code).
func (e *Engine) prepare(ctx context.Context, d *Def, version int64) (*instance, error) {
	in := &instance{e: e, def: d, version: version, grant: grantOf(d), nodes: map[string]*nodeRun{}}
	gen := e.gen.Add(1)
	for _, nd := range d.Nodes {
		nr := &nodeRun{def: nd}
		if nd.Type == TypePython {
			if nd.Entry != "" {
				nr.module, nr.entry, _ = gateway.ParseEntry(nd.Entry)
			} else {
				p, err := e.gw.PrepareNode(ctx, gateway.NodeCode{Flow: d.Name, Node: nd.ID, Version: gen, FlowVersion: version, Code: nd.Code})
				if err != nil {
					in.release()
					var se *gateway.ScriptError
					if errors.As(err, &se) {
						return nil, err // it names the flow, its version and the node (gateway.Nodes)
					}
					return nil, fmt.Errorf("flow %q: node %q: %w", d.Name, nd.ID, err)
				}
				nr.module, nr.entry, nr.ref = p.Ref, "transform", p.Ref
			}
		}
		in.nodes[nd.ID] = nr
	}
	if err := e.checkEntries(ctx, d); err != nil {
		in.release()
		return nil, err
	}
	return in, nil
}

// checkEntries checks that the saved scripts a flow's Python nodes name
// exist with the entry named.
func (e *Engine) checkEntries(ctx context.Context, d *Def) error {
	var need []*NodeDef
	for _, nd := range d.Nodes {
		if nd.Entry != "" {
			need = append(need, nd)
		}
	}
	if len(need) == 0 {
		return nil
	}
	scripts, err := e.gw.ListScripts(ctx, engineGrant)
	if err != nil {
		return err
	}
	for _, nd := range need {
		module, entry, _ := gateway.ParseEntry(nd.Entry)
		found := false
		for _, s := range scripts {
			if s.Module == module {
				found = slices.ContainsFunc(s.Entries, func(en gateway.ScriptEntry) bool { return en.Name == entry })
				if !found {
					return fmt.Errorf("%w: flow %q: node %q: script %s has no entry %s", gateway.ErrInvalid, d.Name, nd.ID, module, entry)
				}
			}
		}
		if !found {
			return fmt.Errorf("%w: flow %q: node %q: no saved script %s (PUT /api/v1/scripts/%s first)", gateway.ErrInvalid, d.Name, nd.ID, module, module)
		}
	}
	return nil
}

// firstLine is err's first line for a stopped flow's reason: a
// *gateway.ScriptError's detail without its kind (the detail names the
// flow, version, node and line), any other error's text.
func firstLine(err error) string {
	s := err.Error()
	var se *gateway.ScriptError
	if errors.As(err, &se) {
		s = se.Detail
	}
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i] + " (and more)"
		}
	}
	return s
}
