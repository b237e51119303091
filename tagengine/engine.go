// Package tagengine owns the tags of QUBIQ Edge: the tag model, the scan
// classes that poll drivers, the current VQT of every tag, the fan-out of
// changes to subscribers, and the write path, where the caller's grant is
// checked (scope tag:write, then each tag's write level, then read-only and
// type) before anything reaches a driver (docs/security.md, "Levels, realms,
// scopes, grants").
//
// tagengine imports device, value and auth only. What it needs from the
// layers above (persisting last values, the audit log, the write-level
// source) are interfaces defined here: LastValueSink, AuditSink, LevelSource.
// The daemon passes the store's implementations.
package tagengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/tagpath"
	"qubiq.dev/edge/value"
)

// LastValueSink persists the last VQT of tags so that a restart can serve
// them as Uncertain_LastUsableValue (docs/project.md, Quality). paths[i]'s
// VQT is vals[i], the paths sorted and unique; the sink keeps neither
// slice. A value it cannot store must not stop the others: it stores them
// and returns an error with a FailedPaths() []string method naming the
// ones it did not (the engine does not retry those); any other error means
// nothing was stored, and the engine retries at the next flush.
type LastValueSink interface {
	PutLastValues(paths []string, vals []value.VQT) error
}

// AuditEvent is one audit record as the engine sees it: who, from where, the
// action ("tag.write" or "tag.write.refused"), the tag, the last known VQT
// before, the value asked for, and the result (a quality name).
type AuditEvent struct {
	Time   time.Time
	Grant  auth.Grant
	Action string
	Target string
	Before *value.VQT
	After  value.Value
	Result string
	Detail string
}

// AuditSink queues audit records. CanAudit reports (nil) whether a record can
// be queued now: a write to equipment whose record could not be queued is
// refused (docs/security.md, Audit). Audit queues one record.
type AuditSink interface {
	CanAudit() error
	Audit(ev AuditEvent) error
}

// LevelSource resolves the write level of tags. An unknown tag resolves to
// the baseline. An error refuses the whole write batch (docs/api.md, POST /tags/write: a failed
// level lookup refuses the whole call).
type LevelSource interface {
	WriteLevels(ctx context.Context, paths []string) (map[string]auth.Level, error)
}

// ErrLevelLookup is wrapped by Write when the write levels could not be
// resolved: nothing was written; the caller should retry (REST answers 503).
var ErrLevelLookup = errors.New("write level lookup failed; nothing was written, retry")

// Config configures an Engine. Baseline is the write level of tags that name
// none (security.baseline_write_level, default operate). Levels overrides the
// built-in level source (the tags' own levels), for tests and remote
// sources. WriteTimeout bounds one driver write (default 10 s).
type Config struct {
	Baseline     auth.Level
	Levels       LevelSource
	LastValues   LastValueSink
	Audit        AuditSink
	WriteTimeout time.Duration
	// FlushEvery is the last-value persistence period (config
	// store.last_values_every), DefaultFlushEvery when zero. Stop and a
	// write of a value the driver holds itself persist at once.
	FlushEvery time.Duration
	Logger     *slog.Logger
}

// DefaultFlushEvery is the default last-value persistence period.
const DefaultFlushEvery = 10 * time.Second

// Result is one tag's VQT as answered to a read.
type Result struct {
	Path string
	value.VQT
}

// WriteRequest asks to write Value to the tag at Path.
type WriteRequest struct {
	Path  string
	Value value.Value
}

// WriteResult is the outcome of one write: Good when the device acknowledged
// it, else the quality that says why not (Bad_UserAccessDenied,
// Bad_NotWritable, Bad_NodeIdUnknown, Bad_TypeMismatch, Bad_OutOfRange,
// Bad_Timeout, Uncertain for a write that timed out after it was sent ...).
type WriteResult struct {
	Path    string
	Quality value.Quality
	Reason  string
}

// Change is a tag's new VQT, delivered to subscribers.
type Change struct {
	Path string
	value.VQT
	record bool // passes the tag's history policy (SubscribeHistory)
}

// tagState is one tag's state. One is kept per configured tag for the
// engine's life, so its fields are ordered to pack (376 bytes, the
// 384-byte size class), the history policy's memory is allocated only
// for a tag that has a policy, and a scan of a tag without scale or
// deadband (scaled, banded) reads neither: of the state's six cache lines
// it touches the path's and cur's (measured over 100,000 tags in groups
// of 1,000: ~40 ns per changed value, ~60 without the flags or with the
// hot fields first).
type tagState struct {
	tag  Tag
	cur  value.VQT
	grp  *group
	hist *histState // the history policy's memory (history.go); nil without a policy
	// written is the engine's write generation (Engine.writeGen) at which
	// a write to a driver that holds its values set cur; a scan whose read
	// began before it leaves cur alone (its reading may predate the write).
	written uint64
	level   auth.Level
	dirty   bool
	// seeded is set while cur is a last value read back after a restart and
	// the device has not answered yet: bad reads keep it
	// Uncertain_LastUsableValue (docs/project.md, Quality).
	seeded bool
	scaled bool // tag.Scale is not the identity
	banded bool // tag.Deadband holds changes back
}

type group struct {
	subscribed bool // changes pushed by the driver (device.Subscriber), not polled
	device     string
	drv        device.Driver
	period     time.Duration
	tags       []*tagState
	points     []device.Point
	kick       chan struct{}
	lastScan   atomic.Int64 // unix nanos of this loop's last completed scan (Start counts)
}

// Engine holds the tags and their current values. Create it with New, start
// its scan loops with Start, stop them with Stop.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	devices map[string]device.Driver
	tags    map[string]*tagState
	order   []string
	sorted  []*tagState // the tags in path order (order)
	// timed are the tags whose history policy has a MaxInterval, in path
	// order (forceHistory).
	timed  []*tagState
	groups []*group

	mu sync.RWMutex // guards tagState.cur and .dirty

	flushMu sync.Mutex // one flush at a time
	// flushPaths, flushVals and flushTags are flush's lists, reused.
	flushPaths []string
	flushVals  []value.VQT
	flushTags  []*tagState
	subs       *subRegistry // shared with the engine's successor (TakeOver)

	// retired is set when a successor took over (TakeOver): a change a
	// driver still pushes into this engine is not published.
	retired atomic.Bool

	now         func() time.Time // the gateway's clock (tests set it)
	histSkipped atomic.Uint64

	polled    int          // groups with a scan loop; set by Start
	progress  atomic.Int64 // unix nanos of the last completed scan
	scans     atomic.Uint64
	writeGen  atomic.Uint64 // counts the writes the engine published itself (held values)
	overruns  atomic.Uint64
	changes   atomic.Uint64 // changes published (Counts)
	wg        sync.WaitGroup
	cancel    context.CancelFunc
	startOnce sync.Once
}

// subRegistry holds the subscribers of an engine and of its successors:
// a subscription outlives a project reload (TakeOver).
type subRegistry struct {
	sync.Mutex
	next int
	m    map[int]*subscriber
	hist map[int]*subscriber // SubscribeHistory
}

// New builds an engine over the devices (by name) and tags. Each tag must
// name a device in devices and pass the driver's CheckPoint; the error names
// the tag, the device and the address. Tag paths must be valid and unique.
func New(cfg Config, devices map[string]device.Driver, tags []Tag) (*Engine, error) {
	if cfg.Baseline == auth.LevelNone {
		cfg.Baseline = auth.LevelOperate
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, devices: devices, tags: map[string]*tagState{}, now: time.Now}
	e.subs = &subRegistry{m: map[int]*subscriber{}, hist: map[int]*subscriber{}}
	var errs []error
	groups := map[string]*group{}
	for _, t := range tags {
		if err := tagpath.Check(t.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := e.tags[t.Path]; dup {
			errs = append(errs, fmt.Errorf("tag %q: defined twice", t.Path))
			continue
		}
		drv, ok := devices[t.Device]
		if !ok {
			errs = append(errs, fmt.Errorf("tag %q: unknown device %q", t.Path, t.Device))
			continue
		}
		t.Point.Tag = t.Path
		if err := drv.CheckPoint(t.Point); err != nil {
			errs = append(errs, fmt.Errorf("tag %q: device %q: %w", t.Path, t.Device, err))
			continue
		}
		if wc, ok := drv.(device.WriteChecker); ok && !wc.Writable(t.Point) {
			t.ReadOnly = true
		}
		if t.Scan <= 0 {
			t.Scan = DefaultScan
		}
		lvl := t.WriteLevel
		if lvl == auth.LevelNone {
			lvl = cfg.Baseline
		}
		st := &tagState{tag: t, level: lvl, cur: value.VQT{Quality: value.BadWaitingForInitialData, Time: time.Now().UTC()}}
		if t.History != nil {
			st.hist = &histState{}
		}
		st.scaled, st.banded = !t.Scale.identity(), t.Deadband != Deadband{}
		e.tags[t.Path] = st
		e.order = append(e.order, t.Path)
		key := fmt.Sprintf("%s\x00%d", t.Device, t.Scan)
		g := groups[key]
		if g == nil {
			g = &group{device: t.Device, drv: drv, period: t.Scan, kick: make(chan struct{}, 1)}
			groups[key] = g
			e.groups = append(e.groups, g)
		}
		st.grp = g
		g.tags = append(g.tags, st)
		g.points = append(g.points, t.Point)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Strings(e.order)
	e.sorted = make([]*tagState, len(e.order))
	for i, p := range e.order {
		st := e.tags[p]
		e.sorted[i] = st
		if h := st.tag.History; h != nil && h.MaxInterval > 0 {
			e.timed = append(e.timed, st)
		}
	}
	return e, nil
}

// Seed sets last values read back from the store after a restart. Each
// becomes Uncertain_LastUsableValue (keeping its value and time) until the
// device answers (docs/project.md, Quality). A driver that holds values itself
// (device.Restorer: the simulator's memory) takes its value back, so a
// setpoint written before the restart is not lost. Unknown paths are
// ignored. Call Seed before Start.
func (e *Engine) Seed(vals map[string]value.VQT) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, v := range vals {
		st, ok := e.lookup(p)
		if !ok || v.Value == nil || (!st.tag.PassNonFinite && value.NonFinite(v.Value) != "") {
			continue // nothing usable to serve (a NaN stored before the tag refused them)
		}
		if r, ok := e.devices[st.tag.Device].(device.Restorer); ok {
			raw := v.Value
			if !st.tag.Scale.identity() {
				var err error
				if raw, err = st.tag.Scale.ToRaw(v.Value, st.tag.Point.Type); err != nil {
					continue
				}
			}
			r.Restore(st.tag.Point, raw)
		}
		v.Quality = value.UncertainLastUsableValue
		v.Reason = "last value before restart; waiting for the device"
		st.cur = v
		st.seeded = true
	}
}

// Start opens every device and starts one scan loop per device and scan
// class. It returns after the loops started; they run until Stop.
func (e *Engine) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	for name, d := range e.devices {
		if err := d.Open(ctx); err != nil {
			cancel()
			return fmt.Errorf("device %q: open: %w", name, err)
		}
	}
	now := time.Now().UnixNano()
	e.progress.Store(now)
	for _, g := range e.groups {
		g.lastScan.Store(now)
	}
	for _, g := range e.groups {
		if err := e.subscribe(ctx, g); err != nil {
			cancel()
			return err
		}
		if g.subscribed {
			continue
		}
		e.polled++
		e.wg.Add(1)
		go e.scanLoop(ctx, g)
	}
	e.wg.Add(1)
	go e.flushLoop(ctx)
	return nil
}

// Stop ends the scan loops, persists the last values and closes the devices.
func (e *Engine) Stop(ctx context.Context) error {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	err := e.flush()
	for name, d := range e.devices {
		if cerr := d.Close(ctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("device %q: close: %w", name, cerr))
		}
	}
	return err
}

// publish hands changes to the subscribers, and those that pass their
// tag's history policy to the history subscribers.
// They are copied into a pooled batch the subscribers share (fanout.go);
// the caller keeps changes.
func (e *Engine) publish(changes []Change) {
	if e.retired.Load() {
		return
	}
	b := newBatch(changes)
	e.publishBatch(b)
	b.release()
}

// publishBatch is publish for changes already in a batch; the caller
// keeps its reference.
func (e *Engine) publishBatch(b *batch) {
	if e.retired.Load() {
		return
	}
	changes := b.c
	e.changes.Add(uint64(len(changes)))
	n := 0
	for i := range changes {
		if changes[i].record {
			n++
		}
	}
	if n > 0 {
		hb := newBatch(nil)
		for _, c := range changes {
			if c.record {
				hb.c = append(hb.c, c)
			}
		}
		e.publishHistory(hb)
		hb.release()
	}
	e.subs.Lock()
	for _, s := range e.subs.m {
		if s.want == nil {
			e.offer(s, b)
			continue
		}
		// A filtered subscriber gets a batch of its own with the changes
		// it wants, or none.
		var fb *batch
		for i := range b.c {
			if s.want(b.c[i].Path) {
				if fb == nil {
					fb = newBatch(nil)
				}
				fb.c = append(fb.c, b.c[i])
			}
		}
		if fb != nil {
			e.offer(s, fb)
			fb.release()
		}
	}
	e.subs.Unlock()
}

// offer hands changes to s, counting (and logging at the first) what did
// not fit.
func (e *Engine) offer(s *subscriber, b *batch) {
	if lost := s.offer(b); lost > 0 && s.dropped.Add(uint64(lost)) == uint64(lost) {
		e.log.Warn(s.warn)
	}
}

// Subscribe returns a channel of changes with room for buf pending changes,
// and a function that ends the subscription. A subscriber that falls behind
// loses changes; the count is returned by the dropped function (docs/architecture.md:
// never dropped silently).
func (e *Engine) Subscribe(buf int) (ch <-chan Change, dropped func() uint64, cancel func()) {
	return e.SubscribeFunc(buf, nil)
}

// SubscribeFunc is Subscribe for the changes of the tags whose path want
// accepts (nil: every tag): the others are never queued for it, so a
// subscriber that watches a few tags, or none for now, costs the scans
// nothing for the rest. want is called from the scan loops, with the
// path of each change, and must not block; what it accepts may change
// over time (a subscriber that starts to watch a tag reads its current
// value itself). dropped counts only wanted changes.
func (e *Engine) SubscribeFunc(buf int, want func(path string) bool) (ch <-chan Change, dropped func() uint64, cancel func()) {
	s := newSubscriber(buf, "subscriber queue full; changes dropped and counted")
	s.want = want
	e.subs.Lock()
	id := e.subs.next
	e.subs.next++
	e.subs.m[id] = s
	e.subs.Unlock()
	return s.ch, s.dropped.Load, func() {
		e.subs.Lock()
		delete(e.subs.m, id)
		e.subs.Unlock()
		s.close()
	}
}

// flushLoop ticks every second (or every FlushEvery when that is
// shorter): it records the max-interval history samples due, proves
// progress when nothing is polled, and persists the last values every
// FlushEvery.
func (e *Engine) flushLoop(ctx context.Context) {
	defer e.wg.Done()
	tick := min(time.Second, e.cfg.FlushEvery)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastFlush := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(lastFlush) >= e.cfg.FlushEvery-tick/2 {
				lastFlush = now
				if err := e.flush(); err != nil {
					e.log.Error("persist last values failed", slog.Any("err", err))
				}
			}
			e.forceHistory()
			if e.polled == 0 {
				// Only pushed values: this loop's own progress is the proof.
				e.progress.Store(time.Now().UnixNano())
			}
		}
	}
}

func (e *Engine) flush() error {
	if e.cfg.LastValues == nil {
		return nil
	}
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	paths, vals, tags := e.flushPaths[:0], e.flushVals[:0], e.flushTags[:0]
	e.mu.Lock()
	if cap(paths) < len(e.sorted) {
		if n := e.dirtyCount(); cap(paths) < n {
			// Sized once for what is dirty, not grown by doubling
			// (100,000 tags: 9.6 MiB of VQTs copied again and again).
			paths, vals, tags = make([]string, 0, n), make([]value.VQT, 0, n), make([]*tagState, 0, n)
		}
	}
	for _, st := range e.sorted {
		if st.dirty && st.cur.Value != nil {
			paths = append(paths, st.tag.Path)
			vals = append(vals, st.cur)
			tags = append(tags, st)
			st.dirty = false
		}
	}
	e.mu.Unlock()
	defer func() {
		// Reused by the next flush; the sink keeps none of it, and no
		// value is kept alive between flushes.
		clear(vals)
		clear(tags)
		e.flushPaths, e.flushVals, e.flushTags = paths[:0], vals[:0], tags[:0]
	}()
	if len(paths) == 0 {
		return nil
	}
	if err := e.cfg.LastValues.PutLastValues(paths, vals); err != nil {
		var partial interface{ FailedPaths() []string }
		if !errors.As(err, &partial) {
			// Nothing was stored: try again at the next flush.
			e.mu.Lock()
			for _, st := range tags {
				st.dirty = true
			}
			e.mu.Unlock()
		} // else the others were stored, and the failed ones cannot be: no retry loop
		return fmt.Errorf("save last values: %w", err)
	}
	return nil
}

// dirtyCount is how many tags flush would persist now. The caller holds
// e.mu.
func (e *Engine) dirtyCount() int {
	n := 0
	for _, st := range e.sorted {
		if st.dirty && st.cur.Value != nil {
			n++
		}
	}
	return n
}

// lookup returns the tag at path p, compared in NFC (tagpath.Normalize):
// every front door that names a tag by its path finds the same tag for
// "Kühlung" typed precomposed or decomposed.
func (e *Engine) lookup(p string) (*tagState, bool) {
	st, ok := e.tags[p]
	if !ok {
		if n := tagpath.Normalize(p); n != p {
			st, ok = e.tags[n]
		}
	}
	return st, ok
}

// reasonOutsidePrefixes is the one reason of a read or write refused for a
// path outside the grant's prefixes.
const reasonOutsidePrefixes = "path outside the allowed prefixes"

// outsidePrefixes reports whether p, as a tag path (tagpath.Normalize),
// lies outside g's prefixes. Read and Write check it before looking the
// tag up, so a path outside them is refused the same way whether or not
// the tag exists: prefixes cannot be used to probe which tags exist.
func outsidePrefixes(g auth.Grant, p string) bool {
	return !g.AllowsPath(tagpath.Normalize(p))
}

// Progress returns how far every scan loop has come: the oldest of the
// loops' last completed scans (Start counts as one), so one wedged loop
// holds it back while the others keep scanning; with no polled loop, when
// the flush loop last ran. The daemon's watchdog adds the longest scan
// period to it.
// The systemd watchdog pings only while this moves (docs/architecture.md, rules from
// the field: the watchdog proves progress).
func (e *Engine) Progress() time.Time {
	oldest := int64(0)
	for _, g := range e.groups {
		if g.subscribed {
			continue
		}
		if t := g.lastScan.Load(); oldest == 0 || t < oldest {
			oldest = t
		}
	}
	if oldest == 0 {
		oldest = e.progress.Load()
	}
	return time.Unix(0, oldest)
}

// Stats returns the number of completed scans and of scans that overran
// their period.
func (e *Engine) Stats() (scans, overruns uint64) { return e.scans.Load(), e.overruns.Load() }

// Counts are the engine's figures for the metrics: the configured tags,
// the changes published to subscribers, completed scans and those that
// overran their period, and changes the history feed skipped.
type Counts struct {
	Tags        int
	Changes     uint64
	Scans       uint64
	Overruns    uint64
	HistSkipped uint64
}

// Counts returns the engine's figures now (counters since New).
func (e *Engine) Counts() Counts {
	return Counts{Tags: len(e.tags), Changes: e.changes.Load(), Scans: e.scans.Load(), Overruns: e.overruns.Load(),
		HistSkipped: e.histSkipped.Load()}
}

// Tags returns the configured tags whose paths g may see (its prefixes),
// sorted by path, with their effective write level.
func (e *Engine) Tags(g auth.Grant) []TagInfo {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]TagInfo, 0, len(e.order))
	for _, st := range e.sorted {
		if !g.AllowsPath(st.tag.Path) {
			continue
		}
		out = append(out, TagInfo{Tag: st.tag, WriteLevel: st.level, Current: st.cur})
	}
	return out
}

// TagInfo is a tag with its effective write level and current VQT.
type TagInfo struct {
	Tag
	WriteLevel auth.Level
	Current    value.VQT
}

// Read returns the current VQT of each path, in order: a path outside g's
// prefixes is Bad_UserAccessDenied whether or not the tag exists
// (outsidePrefixes), an unknown path inside them Bad_NodeIdUnknown
// (docs/values.md). It fails with a *auth.DeniedError when g lacks
// tag:read.
func (e *Engine) Read(g auth.Grant, paths []string) ([]Result, error) {
	if err := g.RequireScope(auth.TagRead, "tag.read"); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	out := make([]Result, len(paths))
	e.mu.RLock()
	defer e.mu.RUnlock()
	for i, p := range paths {
		out[i].Path = p
		if outsidePrefixes(g, p) {
			out[i].VQT = value.Bad(value.BadUserAccessDenied, reasonOutsidePrefixes, now)
			continue
		}
		switch st, ok := e.lookup(p); {
		case !ok:
			out[i].VQT = value.Bad(value.BadNodeIDUnknown, "unknown tag", now)
		default:
			out[i].VQT = st.cur
		}
	}
	return out, nil
}

// DeviceStates returns each device's connection state and reason, for health.
func (e *Engine) DeviceStates() map[string][2]string {
	out := map[string][2]string{}
	for n, d := range e.devices {
		if s, ok := d.(device.Stater); ok {
			st, r := s.State()
			out[n] = [2]string{st, r}
		} else {
			out[n] = [2]string{"unknown", ""}
		}
	}
	return out
}

// DeviceStats returns the request statistics of each device whose driver
// keeps them (device.StatsReporter: Modbus, OPC UA); others are absent.
func (e *Engine) DeviceStats() map[string]device.Stats {
	out := map[string]device.Stats{}
	for n, d := range e.devices {
		if r, ok := d.(device.StatsReporter); ok {
			out[n] = r.Stats()
		}
	}
	return out
}

// PlanStep is one request of a device's scan plan, with the scan class it
// belongs to.
type PlanStep struct {
	Scan time.Duration
	device.PlannedRequest
}

// ErrUnknownDevice is wrapped by Plan for a device the project does not have.
var ErrUnknownDevice = errors.New("unknown device")

// Plan returns the requests one scan of each scan class of the device sends,
// as its driver plans them (device.Planner); a driver that does not plan
// returns none. The plan is computed from the configuration; nothing is sent.
func (e *Engine) Plan(name string) ([]PlanStep, error) {
	drv, ok := e.devices[name]
	if !ok {
		return nil, fmt.Errorf("device %q: %w", name, ErrUnknownDevice)
	}
	p, ok := drv.(device.Planner)
	if !ok {
		return nil, nil
	}
	var out []PlanStep
	for _, g := range e.groups {
		if g.device != name {
			continue
		}
		for _, r := range p.Plan(g.points) {
			out = append(out, PlanStep{Scan: g.period, PlannedRequest: r})
		}
	}
	return out, nil
}
