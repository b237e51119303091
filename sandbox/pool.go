package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/sandbox/packages"
	"qubiq.dev/edge/sandbox/rpc"
)

// Services is what the daemon gives the sandbox to serve system.* calls.
// Call runs method ("tag.read", without "system.") with the JSON params the
// script sent, for the grant of the run, which the dispatcher has already
// checked against the method's scope (ScopeFor). It returns the JSON result.
// A refusal it decides itself (a tag's write level, a prefix) is an
// *auth.DeniedError and reaches the script as system.PermissionDenied; any
// other error reaches it as system.CallError. ctx ends at the run's timeout
// or when the worker dies. The result must be valid JSON: it is passed to
// the worker unchecked (a malformed one reaches the script as
// system.CallError).
//
// Shapes (sandbox/METHODS.md; README: Scripting API and data):
//
//	tag.read  {"paths": [...]}                 → [{"path","value","quality","timestamp","reason"}]
//	tag.write {"paths": [...], "values": [...]} → ["Good", "Bad_UserAccessDenied", ...]
//
// Other methods pass their arguments as an object keyed by the Python
// parameter names of their row of the method table (Methods; ParseArgs
// decodes them strictly).
type Services interface {
	Call(ctx context.Context, g auth.Grant, method string, params json.RawMessage) (json.RawMessage, error)
}

// Entry is one entry point of a module: a top-level function that takes one
// argument, and its timeout in milliseconds (@gateway(timeout_ms=N) clamped
// to the config, the default when absent).
type Entry struct {
	Name      string `json:"name"`
	TimeoutMs int    `json:"timeout_ms"`
}

// Diagnostic is one finding of Check, in the shape of the REST lint
// route: 1-based line and character column, Code ("syntax-error",
// "syntax-warning", "forbidden-attribute", "forbidden-name",
// "forbidden-import", "gateway-timeout"), Message, Severity ("error" or
// "warning").
type Diagnostic struct {
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Severity  string `json:"severity"`
}

// ModuleInfo is what Check found in a module.
type ModuleInfo struct {
	Entries     []Entry      `json:"entries"`
	Diagnostics []Diagnostic `json:"diagnostics"`
}

// Log is one line a script logged (print() logs at "info").
type Log struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

// RunResult is what a run returned: the entry's return value as JSON, the
// lines it logged and how long it ran, in milliseconds.
type RunResult struct {
	Result     json.RawMessage `json:"result"`
	Logs       []Log           `json:"logs"`
	DurationMs float64         `json:"duration_ms"`
}

// Limits of logs kept per run.
const (
	maxLogs     = 1000
	maxLogBytes = 16 << 10
)

// runLogs keeps the first maxLogs lines of a run, each cut at maxLogBytes,
// and counts the lines past them (docs/scripting.md, "print and logging").
type runLogs struct {
	lines   []Log
	dropped int
}

func (l *runLogs) add(level, msg string) {
	if len(l.lines) >= maxLogs {
		l.dropped++
		return
	}
	l.lines = append(l.lines, Log{Level: level, Msg: truncate(msg, maxLogBytes)})
}

// kept returns the lines kept, and when some were dropped a last line that
// says how many: a cut log never looks whole.
func (l *runLogs) kept() []Log {
	if l.dropped == 0 {
		return l.lines
	}
	return append(l.lines, Log{Level: "warning",
		Msg: fmt.Sprintf("… %d later lines dropped (limit %d lines per run)", l.dropped, maxLogs)})
}

// module is the current code of one module.
type moduleCode struct {
	name    string
	code    string
	version int
	entries map[string]time.Duration
}

// job is one run waiting for or running on a worker.
type job struct {
	ctx     context.Context
	grant   auth.Grant
	mod     *moduleCode
	entry   string
	args    json.RawMessage
	timeout time.Duration
	state   atomic.Int32 // jobQueued → jobTaken | jobAbandoned
	done    chan jobResult
	key     string // the run queue's fairness key (queueKey)
	flow    bool   // a flow's node run (RunNodes): counts against Config.FlowWorkers
	// batch, for a node run, is the messages: the entry runs once per
	// message (jobResult.items), each with the job's timeout.
	batch []json.RawMessage
}

const (
	jobQueued int32 = iota
	jobTaken
	jobAbandoned
)

type jobResult struct {
	res   RunResult
	err   error
	items []NodeItem // a node run's outcome per message, in order
}

// Pool is the pool of Python workers. Its methods are safe for concurrent
// use.
type Pool struct {
	cfg    Config
	svc    Services
	logger *slog.Logger

	codeDir      string
	homeDir      string
	selfExe      string
	startTimeout time.Duration
	allowed      []string // import roots besides installed packages

	mu        sync.RWMutex
	python    string // resolved interpreter, set by Start
	pyVersion string
	iso       *isolation // set by Start
	modules   map[string]*moduleCode
	status    string // "ok", "missing", "failed", "" before Start
	reason    string
	started   bool
	startDone chan struct{} // closed when Start returns (warm.go)
	holdMu    sync.Mutex
	holds     int           // Hold's unreleased holds
	holdC     chan struct{} // closed when the last is released; nil without holds
	closed    bool
	closing   chan struct{}
	slotErrs  map[int]string

	ruff      string    // the ruff executable, "" for the syntax-only linter
	tagReader TagReader // the Services' fast path of tag.read, if they have one

	// Packages (sandbox/packages) install into generations; pkgSeq
	// counts generations, and restart is closed (and replaced) when it
	// changes so idle slots restart their worker; roll lets one worker
	// restart at a time.
	pkgs    *packages.Manager
	pkgSeq  atomic.Uint64
	restart chan struct{}
	roll    chan struct{}
	slots   []slotInfo // under mu

	// q holds the runs waiting (queue.go); the feeder hands them, in fair
	// order, to the slots through jobs (unbuffered).
	q        *runQueue
	jobs     chan *job
	wg       sync.WaitGroup
	live     atomic.Int64
	busy     atomic.Int64
	queued   atomic.Int64
	timeouts atomic.Uint64
	ooms     atomic.Uint64
	stats    runStats // runs by result, worker restarts (stats.go)
}

// defaultAllowed are the import roots every script has: system, math, json,
// datetime (installed packages are added by the worker).
var defaultAllowed = []string{"datetime", "json", "math", "system"}

// New returns a pool for cfg; nothing starts before Start. The error joins
// every invalid field of cfg.
func New(cfg Config, svc Services, logger *slog.Logger) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox: config: %w", err)
	}
	if svc == nil {
		return nil, errors.New("sandbox: no Services")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	exe, _ := os.Executable() // "" disables the sandbox-exec helper
	tr, _ := svc.(TagReader)
	p := &Pool{
		tagReader:    tr,
		restart:      make(chan struct{}),
		roll:         make(chan struct{}, 1),
		slots:        make([]slotInfo, cfg.Replicas),
		codeDir:      filepath.Join(cfg.DataDir, "run", "sandbox", "code"),
		homeDir:      filepath.Join(cfg.DataDir, "run", "sandbox", "home"),
		selfExe:      exe,
		cfg:          cfg,
		svc:          svc,
		logger:       logger,
		modules:      map[string]*moduleCode{},
		closing:      make(chan struct{}),
		startDone:    make(chan struct{}),
		slotErrs:     map[int]string{},
		q:            newRunQueue(max(cfg.Queue, 1), cfg.flowWorkers()),
		jobs:         make(chan *job),
		startTimeout: 20 * time.Second,
		allowed:      defaultAllowed,
	}
	p.pkgs = packages.New(packages.Options{DataDir: cfg.DataDir, IndexURL: cfg.IndexURL, Builtin: defaultAllowed,
		Restart: p.rollWorkers, Logger: logger})
	return p, nil
}

// PackageManager returns the pool's package manager (sandbox/packages):
// installs and removals of the administrator's packages, whose switch to a
// new set restarts the workers one at a time.
func (p *Pool) PackageManager() *packages.Manager { return p.pkgs }

// Allowed returns the import roots scripts may use now: the built-in
// allow-list and the installed packages' import names, sorted.
func (p *Pool) Allowed() []string { return p.pkgs.Allowed() }

// Start resolves the interpreter, writes the worker code to
// <DataDir>/run/sandbox, sets up isolation and starts cfg.Replicas workers.
// When the interpreter is missing or no worker passes its handshake, the pool
// is degraded: Start logs why and returns nil, Health reports it, and Run and
// Check fail with kind runtime_missing. Start returns an error only when ctx
// ends or Start was called before.
func (p *Pool) Start(ctx context.Context) error {
	if err := p.begin(); err != nil {
		return err
	}
	return p.start(ctx)
}

// begin marks the pool started; once only.
func (p *Pool) begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("sandbox: Start called twice")
	}
	p.started = true
	return nil
}

// start is Start's work, after begin; startDone is closed when it returns.
func (p *Pool) start(ctx context.Context) error {
	defer close(p.startDone)

	python, err := resolvePython(ctx, p.cfg.PythonPath)
	ruff := findRuff(p.cfg.PythonPath, python)
	p.mu.Lock()
	p.ruff = ruff
	p.mu.Unlock()
	if ruff != "" {
		p.logger.Info("script linter: ruff", "path", ruff)
	} else {
		p.logger.Info("script linter: syntax-only (no ruff in the runtime's bin/ nor on PATH)")
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.degrade("missing", fmt.Sprintf("interpreter %s: %v", p.cfg.PythonPath, err))
		return nil
	}
	p.mu.Lock()
	p.python = python
	p.mu.Unlock()
	if err := writePythonFiles(p.codeDir); err != nil {
		p.degrade("failed", err.Error())
		return nil
	}
	if err := os.MkdirAll(p.homeDir, 0o700); err != nil {
		p.degrade("failed", fmt.Sprintf("sandbox: create %s: %v", p.homeDir, err))
		return nil
	}
	if err := p.pkgs.Init(python); err != nil {
		p.degrade("failed", err.Error())
		return nil
	}
	iso := p.setupIsolation(ctx)
	p.mu.Lock()
	p.iso = iso
	p.mu.Unlock()

	// Start every slot's first worker in parallel: start-up costs add
	// up per worker (bench/README.md, bench-sandbox).
	type started struct {
		idx int
		w   *worker
		err error
	}
	ch := make(chan started, p.cfg.Replicas)
	for i := range p.cfg.Replicas {
		go func() {
			conf, err := p.iso.slot(i)
			if err != nil {
				ch <- started{idx: i, err: err}
				return
			}
			w, err := p.startWorker(ctx, conf)
			ch <- started{idx: i, w: w, err: err}
		}()
	}
	workers := make([]*worker, p.cfg.Replicas)
	var firstErr error
	ok := 0
	for range p.cfg.Replicas {
		s := <-ch
		workers[s.idx] = s.w
		if s.err != nil {
			if firstErr == nil {
				firstErr = s.err
			}
			p.setSlotErr(s.idx, s.err)
			continue
		}
		ok++
		p.mu.Lock()
		p.pyVersion = s.w.python
		p.mu.Unlock()
	}
	if ctx.Err() != nil {
		for _, w := range workers {
			if w != nil {
				w.kill()
				w.close()
			}
		}
		p.closeIsolation()
		return ctx.Err()
	}
	if ok == 0 {
		p.closeIsolation()
		p.degrade("failed", firstErr.Error())
		return nil
	}
	p.mu.Lock()
	p.status = "ok"
	p.mu.Unlock()
	for i, w := range workers {
		if w != nil {
			p.live.Add(1)
			p.setSlot(i, w)
		}
		p.wg.Add(1)
		go p.slotLoop(i, w)
	}
	p.wg.Add(1)
	go p.feed()
	p.logger.Info("sandbox started", "python", p.python, "version", p.pyVersion,
		"workers", ok, "replicas", p.cfg.Replicas, "mode", p.iso.mode)
	if firstErr != nil {
		p.logger.Warn("sandbox worker failed to start", "err", firstErr)
	}
	return nil
}

// closeIsolation removes the pool's cgroups, logging what could not be.
func (p *Pool) closeIsolation() {
	if err := p.iso.close(); err != nil {
		p.logger.Warn("sandbox cgroup cleanup failed", "err", err)
	}
}

func (p *Pool) degrade(status, reason string) {
	p.mu.Lock()
	p.status, p.reason = status, reason
	p.mu.Unlock()
	p.pkgs.SetUnavailable(reason)
	p.logger.Error("sandbox degraded: scripts will fail with runtime_missing", "status", status, "reason", reason)
}

func (p *Pool) setSlotErr(i int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.slotErrs, i)
		return
	}
	p.slotErrs[i] = err.Error()
}

// hello is the first frame of a new worker, and the packages generation
// it carries.
func (p *Pool) hello() (*rpc.Hello, uint64) {
	gen, installed := p.pkgs.Current()
	return &rpc.Hello{Type: rpc.TypeHello, Allowed: p.allowed, Packages: gen,
		Installed: installed, ReadPaths: []string{}}, p.pkgSeq.Load()
}

// runtimeErr is the error of Run and Check in a degraded pool, or nil.
func (p *Pool) runtimeErr() *RunError {
	p.mu.RLock()
	defer p.mu.RUnlock()
	switch {
	case p.closed:
		return runErr(KindKilled, "the sandbox is shut down")
	case p.status == "ok":
		return nil
	case p.status == "":
		return runErr(KindRuntimeMissing, "the Python runtime is not started yet")
	}
	return runErr(KindRuntimeMissing, "the Python runtime is missing: reinstall the firmware package "+
		"or set python.path / PYTHON_PATH to the bundled interpreter (%s)", p.reason)
}

// Close stops every worker, fails queued runs with kind killed and removes
// the workers' cgroups. It waits for running jobs to end until ctx ends.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	p.mu.Unlock()

	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("sandbox: close: %w", ctx.Err())
	}
	for _, j := range p.q.drain() {
		p.queued.Add(-1)
		if j.state.CompareAndSwap(jobQueued, jobTaken) {
			j.done <- jobResult{err: runErr(KindKilled, "the sandbox is shutting down")}
		}
	}
	if p.iso != nil {
		return p.iso.close()
	}
	return nil
}

// SetModule registers code as the current version of module, with the
// entries Check found in it (info). Runs started afterwards use it; a
// version of 0 or lower is accepted (the daemon's own numbering).
func (p *Pool) SetModule(module, code string, info ModuleInfo, version int) {
	m := &moduleCode{name: module, code: code, version: version, entries: map[string]time.Duration{}}
	for _, e := range info.Entries {
		m.entries[e.Name] = p.cfg.clampTimeout(e.TimeoutMs)
	}
	p.mu.Lock()
	p.modules[module] = m
	p.mu.Unlock()
}

// RemoveModule forgets module; later runs of it fail with kind invalid.
func (p *Pool) RemoveModule(module string) {
	p.mu.Lock()
	delete(p.modules, module)
	p.mu.Unlock()
}

// Modules returns the names of the registered modules, sorted.
func (p *Pool) Modules() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]string, 0, len(p.modules))
	for n := range p.modules {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Run runs entry of module with args (any JSON value; empty means null) for
// the grant g, in a fresh namespace on a free worker, with the entry's
// timeout (@gateway(timeout_ms=N), clamped to python.gateway_timeout). When
// every worker is busy, runs wait in the run queue: in order for one
// principal, round robin between principals (queue.go); when it is full,
// Run fails with kind busy. The run is killed at its timeout (kind timeout)
// or when ctx ends (kind timeout for a deadline, killed for a cancel); its
// worker is then replaced. Errors are *RunError; on error the RunResult
// still carries the logs and the duration.
func (p *Pool) Run(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (RunResult, error) {
	j, err := p.newJob(ctx, g, module, entry, args, 0)
	if err != nil {
		return RunResult{}, err
	}
	r := p.submit(j)
	p.stats.countResult(r.err)
	return r.res, r.err
}

// RunNode is Run for one message of a Python node of a flow (def
// transform(msg)): the timeout is cfg.NodeTimeout instead of the entry's
// gateway timeout (python.node_timeout), and the run counts against the
// flows' share of the workers (Config.FlowWorkers).
func (p *Pool) RunNode(ctx context.Context, g auth.Grant, module, entry string, msg json.RawMessage) (RunResult, error) {
	j, err := p.newJob(ctx, g, module, entry, msg, p.cfg.NodeTimeout)
	if err != nil {
		return RunResult{}, err
	}
	j.flow = true
	r := p.submit(j)
	p.stats.countResult(r.err)
	return r.res, r.err
}

func (p *Pool) newJob(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage, timeout time.Duration) (*job, error) {
	p.awaitWarm(ctx, p.runWait(module, entry, timeout), true)
	if err := p.runtimeErr(); err != nil {
		return nil, err
	}
	p.mu.RLock()
	m := p.modules[module]
	p.mu.RUnlock()
	if m == nil {
		return nil, runErr(KindNotFound, "unknown module %q", module)
	}
	entryTimeout, ok := m.entries[entry]
	if !ok {
		return nil, runErr(KindInvalid, "module %q has no entry %q", module, entry)
	}
	if timeout <= 0 {
		timeout = entryTimeout
	}
	if len(args) == 0 {
		args = json.RawMessage("null")
	} else if !json.Valid(args) {
		return nil, runErr(KindInvalid, "args of %s.%s are not valid JSON", module, entry)
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(err, module, entry)
	}
	if held := heldWorkers(ctx); held >= p.cfg.Replicas {
		// Every worker is held by a run waiting, through system.* calls,
		// for this one: it could never start, and waiting would only end at
		// the caller's timeout.
		return nil, runErr(KindBusy, "%s.%s cannot start: all %d workers (python.replicas) are held by the scripts waiting on it, %d nested runs deep; raise python.replicas or nest less",
			module, entry, p.cfg.Replicas, held)
	}
	return &job{ctx: ctx, grant: g, mod: m, entry: entry, args: args, timeout: timeout,
		done: make(chan jobResult, 1), key: queueKey(g)}, nil
}

// heldKey marks the context of a run's system.* calls with the number of
// workers its chain of runs holds (the run's own, and those of the runs
// waiting on it through script.runOnGateway or message.send).
type heldKey struct{}

// heldWorkers is how many workers the runs whose system.* call ctx is hold
// (0 outside a run).
func heldWorkers(ctx context.Context) int {
	n, _ := ctx.Value(heldKey{}).(int)
	return n
}

// holding is the context of the system.* calls of a run started with ctx:
// one worker more held.
func holding(ctx context.Context) context.Context {
	return context.WithValue(ctx, heldKey{}, heldWorkers(ctx)+1)
}

// submit queues j and waits for its result. A run waits for a worker at
// most its own timeout: a caller is never held longer than that in the
// queue without an answer (busy, retry). A flow's node run waits for its
// turn on the flows' share as long as its caller's ctx lets it: the flow's
// own bounded queue is where its back-pressure shows.
func (p *Pool) submit(j *job) jobResult {
	p.queued.Add(1)
	evicted, err := p.q.push(j)
	if evicted {
		p.queued.Add(-1)
	}
	if err != nil {
		p.queued.Add(-1)
		return jobResult{err: err}
	}
	var waitC <-chan time.Time
	if !j.flow {
		wait := time.NewTimer(j.timeout)
		defer wait.Stop()
		waitC = wait.C
	}
	select {
	case r := <-j.done:
		return r
	case <-waitC:
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			p.unqueue(j)
			return jobResult{err: runErr(KindBusy, "%s waited %s (its timeout) and no Python worker became free; retry later",
				j.name(), j.timeout)}
		}
	case <-j.ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			p.unqueue(j)
			return jobResult{err: ctxErr(j.ctx.Err(), j.mod.name, j.entry)}
		}
	case <-p.closing:
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			p.unqueue(j)
			return jobResult{err: runErr(KindKilled, "the sandbox is shutting down")}
		}
	}
	return <-j.done // taken by a worker (which answers even when it is killed), or evicted
}

// unqueue takes an abandoned run out of the queue; one already handed to
// the slots is counted off there.
func (p *Pool) unqueue(j *job) {
	if p.q.remove(j) {
		p.queued.Add(-1)
	}
}

// feed hands the queued runs, in the queue's fair order, to the slots
// until the pool closes.
func (p *Pool) feed() {
	defer p.wg.Done()
	for {
		j := p.q.next(p.closing)
		if j == nil {
			return
		}
		select {
		case p.jobs <- j:
		case <-p.closing:
			p.queued.Add(-1)
			p.q.taken()
			p.q.finish(j)
			if j.state.CompareAndSwap(jobQueued, jobTaken) {
				j.done <- jobResult{err: runErr(KindKilled, "the sandbox is shutting down")}
			}
			return
		}
	}
}

// ctxErr maps the end of a caller's ctx to a RunError.
func ctxErr(err error, module, entry string) *RunError {
	if errors.Is(err, context.DeadlineExceeded) {
		return runErr(KindTimeout, "%s.%s did not finish before its caller's deadline", module, entry)
	}
	return runErr(KindKilled, "%s.%s was cancelled by its caller", module, entry)
}
