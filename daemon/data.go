package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/files"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
)

// Data is the system.* services beyond tags (issue 4): vars, history,
// files, SQL databases, messages and nested script runs, for scripts
// (services.Call) and REST (the api.Data routes). Every changing call and
// every refusal it decides is audited once (DESIGN.md, "Audit").
type Data struct {
	s   *System
	log *slog.Logger

	Vars    *store.Vars
	History *store.History
	Files   *files.FS
	DB      *sqldb.Registry

	handlers map[string]MessageHandler

	// Runner runs nested entries (message.send, script.runOnGateway); nil
	// means the System's Scripts.
	Runner ScriptRunner
	// EntryRestriction, when set, returns the restriction of a gateway
	// entry: a nested run's grant is the caller's intersected with it
	// (DESIGN.md: a script called by a script never gets more than its
	// caller).
	EntryRestriction func(module, entry string) (auth.Grant, bool)

	txGrants sync.Map // tx handle → auth.Grant that opened it (for audit)

	stopFeed func()
	feedDone chan struct{}
	feedDrop func() uint64
}

// ScriptRunner runs a gateway entry with a grant: the daemon's Scripts.
type ScriptRunner interface {
	RunScript(ctx context.Context, g auth.Grant, module, entry string, args json.RawMessage) (apitypes.ScriptRun, error)
}

// MessageHandler is one entry of the project's message_handlers: the
// handler name scripts and REST send to, the gateway entry that runs it,
// and an optional restriction of the sender's grant (scopes, write level).
type MessageHandler struct {
	Name     string
	Module   string
	Entry    string
	Restrict *auth.Grant
	Line     int
}

// MaxCallDepth is how deep message.send and script.runOnGateway may nest
// (a script calling a script calling ...).
const MaxCallDepth = 4

// NewData opens the data services over the System's store and config:
// system.vars and history in the store, system.files in
// <data_dir>/files, the SQL registry (local.sqlite, connections sealed with
// secrets.key) with the project's connections, named queries and message
// handlers. Every project error is reported, naming the file, line and
// entry. Close it after use.
func NewData(s *System) (_ *Data, err error) {
	d := &Data{s: s, log: s.Log.With("subsystem", "data"), handlers: map[string]MessageHandler{}}
	defer func() {
		if err != nil {
			d.Close(context.Background())
		}
	}()
	d.Vars = store.NewVars(s.DB)
	ret := s.Config.History.Retention
	d.History, err = store.OpenHistory(s.DB, store.HistoryOptions{MaxAge: ret.MaxAge.D(), MaxBytes: int64(ret.MaxBytes),
		Logger: s.Log.With("subsystem", "history")})
	if err != nil {
		return nil, err
	}
	if d.Files, err = files.Open(filepath.Join(s.Config.DataDir, "files"), files.Limits{}); err != nil {
		return nil, err
	}
	sec, err := sqldb.LoadSecrets(filepath.Join(s.Config.DataDir, sqldb.KeyFile), s.Log)
	if err != nil {
		return nil, err
	}
	d.DB, err = sqldb.Open(sqldb.Options{DataDir: s.Config.DataDir, Secrets: sec, Store: s.DB,
		Logger: s.Log.With("subsystem", "sqldb"), OnTxExpired: d.txExpired})
	if err != nil {
		return nil, err
	}
	if err := d.loadProject(s.Project()); err != nil {
		return nil, err
	}
	return d, nil
}

// loadProject applies the project's connections, named queries, message
// handlers and history policies.
func (d *Data) loadProject(p *config.Project) error {
	if p == nil {
		return nil
	}
	var errs []error
	conns, err := sqldb.ParseConnections(p.File, p.Connections)
	errs = append(errs, err)
	for _, c := range conns {
		conn, err := c.Connection()
		if err == nil {
			err = d.DB.Put(conn)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", p.File, c.Line, err))
		}
	}
	qs, err := sqldb.ParseNamedQueries(p.File, p.NamedQueries)
	errs = append(errs, err)
	d.DB.SetNamedQueries(qs)
	hs, err := ParseMessageHandlers(p.File, p.MessageHandlers)
	errs = append(errs, err)
	for _, h := range hs {
		d.handlers[h.Name] = h
	}
	return errors.Join(errs...) // history policies are the tags' own (tagengine.HistoryPolicy)
}

// CheckData validates the project's sections the data services own
// (connections, named_queries, message_handlers, tag history) without
// opening anything; each error names the file, line and entry
// (qubiqd --check-config).
func CheckData(p *config.Project) error {
	var errs []error
	conns, err := sqldb.ParseConnections(p.File, p.Connections)
	errs = append(errs, err)
	for _, c := range conns {
		if _, err := c.Connection(); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", p.File, c.Line, err))
		}
	}
	_, err = sqldb.ParseNamedQueries(p.File, p.NamedQueries)
	errs = append(errs, err)
	_, err = ParseMessageHandlers(p.File, p.MessageHandlers)
	errs = append(errs, err)
	return errors.Join(errs...) // tag history is checked with the tags (config.EngineTags)
}

type messageHandlerYAML struct {
	Name       string   `yaml:"name"`
	Entry      string   `yaml:"entry"`
	Scopes     []string `yaml:"scopes"`
	WriteLevel string   `yaml:"write_level"`
}

// ParseMessageHandlers strictly decodes the project's message_handlers:
// {name, entry: module.entry, scopes?: [...], write_level?: level}. scopes
// and write_level restrict the sender's grant for the run (never widen it).
// Every bad entry is reported with the file and line.
func ParseMessageHandlers(file string, nodes []yaml.Node) ([]MessageHandler, error) {
	var out []MessageHandler
	var errs []error
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		bad := func(name, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s:%d: message handler %q: %s", file, n.Line, name, fmt.Sprintf(format, args...)))
		}
		var y messageHandlerYAML
		if n.Kind != yaml.MappingNode {
			bad("", "want a mapping {name, entry}")
			continue
		}
		b, _ := yaml.Marshal(n)
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&y); err != nil {
			bad(y.Name, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			continue
		}
		module, entry, ok := strings.Cut(y.Entry, ".")
		switch {
		case y.Name == "" || len(y.Name) > 64:
			bad(y.Name, "needs a name (at most 64 characters)")
			continue
		case seen[y.Name]:
			bad(y.Name, "defined twice")
			continue
		case !ok || !moduleRe.MatchString(module) || !moduleRe.MatchString(entry):
			bad(y.Name, "entry %q: want module.entry", y.Entry)
			continue
		}
		seen[y.Name] = true
		h := MessageHandler{Name: y.Name, Module: module, Entry: entry, Line: n.Line}
		if y.Scopes != nil || y.WriteLevel != "" {
			r := auth.Full("", "", "")
			ok := true
			if y.Scopes != nil {
				r.Scopes = nil
				for _, sc := range y.Scopes {
					s, err := auth.ParseScope(sc)
					if err != nil {
						bad(y.Name, "%v", err)
						ok = false
						continue
					}
					r.Scopes = append(r.Scopes, s)
				}
			}
			if y.WriteLevel != "" {
				l, err := auth.ParseLevel(y.WriteLevel)
				if err != nil {
					bad(y.Name, "%v", err)
					ok = false
				}
				r.WriteLevel = l
			}
			if !ok {
				continue
			}
			h.Restrict = &r
		}
		out = append(out, h)
	}
	return out, errors.Join(errs...)
}

// historyFeed is the capacity of the tag engine subscription that feeds
// history; what overflows is counted by the engine (Alarms).
const historyFeed = 65536

// Start feeds the tag engine's changes to history until Close.
func (d *Data) Start(context.Context) {
	if d.s.Engine() == nil || d.History == nil || d.stopFeed != nil {
		return
	}
	ch, dropped, cancel := d.s.Engine().SubscribeHistory(historyFeed) // what each tag's history policy records
	stop := make(chan struct{})
	d.feedDone = make(chan struct{})
	d.feedDrop = dropped
	d.stopFeed = func() { cancel(); close(stop) }
	go func() {
		defer close(d.feedDone)
		for {
			select {
			case c := <-ch:
				d.History.Offer(c.Path, c.VQT)
			case <-stop:
				return
			}
		}
	}()
}

// Close stops the history feed and closes history (folding its journal),
// vars, the SQL registry (rolling back open transactions) and the files
// root.
func (d *Data) Close(ctx context.Context) {
	if d.stopFeed != nil {
		d.stopFeed()
		<-d.feedDone
		d.stopFeed = nil
	}
	if d.History != nil {
		if err := d.History.Close(ctx); err != nil {
			d.log.Error("close history", slog.Any("err", err))
		}
	}
	if d.Vars != nil {
		if err := d.Vars.Close(ctx); err != nil {
			d.log.Error("close vars", slog.Any("err", err))
		}
	}
	if d.DB != nil {
		if err := d.DB.Close(); err != nil {
			d.log.Error("close sql connections", slog.Any("err", err))
		}
	}
	if d.Files != nil {
		if err := d.Files.Close(); err != nil {
			d.log.Error("close files root", slog.Any("err", err))
		}
	}
}

// Alarms returns what health must show (DESIGN.md: events are never
// dropped silently; field case C24: a failing retention job raises an
// alarm): history's alarms and changes the history feed lost.
func (d *Data) Alarms() []string {
	var out []string
	if d.History != nil {
		out = append(out, d.History.Alarms()...)
	}
	if d.feedDrop != nil {
		if n := d.feedDrop(); n > 0 {
			out = append(out, fmt.Sprintf("history feed lost %d tag changes (subscription queue full)", n))
		}
	}
	return out
}

// runner returns who runs nested entries.
func (d *Data) runner() (ScriptRunner, error) {
	if d.Runner != nil {
		return d.Runner, nil
	}
	if d.s.Scripts == nil {
		return nil, errors.New("scripts are not available in this daemon")
	}
	return d.s.Scripts, nil
}

// --- audit ---

// canAudit refuses a changing call whose audit record could not be queued
// (DESIGN.md, Audit: fail closed).
func (d *Data) canAudit() error {
	if d.s.Audit == nil {
		return nil
	}
	if err := (auditSink{d.s}).CanAudit(); err != nil {
		return fmt.Errorf("refused, nothing changed: %w; retry", err)
	}
	return nil
}

// audit queues one record of a changing call or a refusal.
func (d *Data) audit(g auth.Grant, action, target, result, detail string, after any) {
	if d.s.Audit == nil {
		return
	}
	rec := store.AuditRecord{Principal: g.Principal, Realm: string(g.Realm), Origin: g.Origin,
		Action: action, Target: target, Result: result, Detail: detail}
	if s, ok := scriptOf(g.Origin); ok {
		rec.Script = s
	}
	if after != nil {
		if b, err := json.Marshal(after); err == nil {
			rec.After = b
		}
	}
	if err := d.s.Audit.Enqueue(rec); err != nil {
		d.log.Error("audit record lost", slog.String("action", action), slog.String("target", target), slog.Any("err", err))
	}
}

// changed audits a changing call with its outcome and returns err.
func (d *Data) changed(g auth.Grant, action, target string, after any, err error) error {
	result, detail := "ok", ""
	if err != nil {
		result, detail = "error", err.Error()
		after = nil
	}
	d.audit(g, action, target, result, detail, after)
	return err
}

// denied builds a typed refusal, audits it once and returns it.
func (d *Data) denied(g auth.Grant, method, kind, need, target string) error {
	err := &auth.DeniedError{Kind: kind, Need: need, Target: method + " " + target}
	d.audit(g, method, target, "refused", err.Error(), nil)
	d.log.Info("system call refused", slog.String("method", method), slog.String("principal", g.Principal),
		slog.String("target", target), slog.String("kind", kind))
	return err
}

// small returns v for an audit record when its JSON is short, else its
// size.
func small(v json.RawMessage) any {
	if len(v) <= 256 {
		return map[string]json.RawMessage{"value": v}
	}
	return map[string]int{"bytes": len(v)}
}

// --- vars ---

// varsGet returns key's value and whether it exists.
func (d *Data) varsGet(key string) (json.RawMessage, bool, error) {
	return d.Vars.Get(key)
}

func (d *Data) varsSet(ctx context.Context, g auth.Grant, key string, val json.RawMessage) error {
	if err := d.canAudit(); err != nil {
		return err
	}
	return d.changed(g, "vars.set", key, small(val), d.Vars.Set(ctx, key, val))
}

func (d *Data) varsDelete(ctx context.Context, g auth.Grant, key string) (bool, error) {
	if err := d.canAudit(); err != nil {
		return false, err
	}
	ok, err := d.Vars.Delete(ctx, key)
	return ok, d.changed(g, "vars.delete", key, map[string]bool{"existed": ok}, err)
}

func (d *Data) varsIncr(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error) {
	if by == "" {
		by = "1"
	}
	if err := d.canAudit(); err != nil {
		return nil, err
	}
	v, err := d.Vars.Incr(ctx, key, by)
	return v, d.changed(g, "vars.incr", key, map[string]json.RawMessage{"by": json.RawMessage(by), "value": v}, err)
}

// --- files ---

// filesErr turns a path refusal into a typed, audited denial.
func (d *Data) filesErr(g auth.Grant, method, path string, err error) error {
	if errors.Is(err, files.ErrInvalidPath) {
		return d.denied(g, method, "path", "a path inside the files root ("+strings.TrimPrefix(err.Error(), "files: ")+")", path)
	}
	return err
}

func (d *Data) filesRead(g auth.Grant, path string) ([]byte, error) {
	b, err := d.Files.Read(path)
	return b, d.filesErr(g, "files.read", path, err)
}

func (d *Data) filesSize(g auth.Grant, path string) (int64, error) {
	n, err := d.Files.Size(path)
	return n, d.filesErr(g, "files.size", path, err)
}

func (d *Data) filesChunk(g auth.Grant, path string, off, n int64) ([]byte, error) {
	b, err := d.Files.ReadChunk(path, off, n)
	return b, d.filesErr(g, "files.readChunk", path, err)
}

func (d *Data) filesSave(g auth.Grant, path string, data []byte) error {
	if _, err := files.CleanPath(path); err != nil {
		return d.filesErr(g, "files.save", path, err)
	}
	if err := d.canAudit(); err != nil {
		return err
	}
	err := d.Files.Save(path, data)
	if errors.Is(err, files.ErrInvalidPath) {
		return d.filesErr(g, "files.save", path, err)
	}
	return d.changed(g, "files.save", path, map[string]int{"bytes": len(data)}, err)
}

func (d *Data) filesDelete(g auth.Grant, path string) error {
	if _, err := files.CleanPath(path); err != nil {
		return d.filesErr(g, "files.delete", path, err)
	}
	if err := d.canAudit(); err != nil {
		return err
	}
	err := d.Files.Delete(path)
	if errors.Is(err, files.ErrInvalidPath) {
		return d.filesErr(g, "files.delete", path, err)
	}
	return d.changed(g, "files.delete", path, nil, err)
}

// --- db ---

// txOwner is the owner a transaction handle is bound to: a digest of the
// whole grant that opened it (principal, realm, origin, scopes, level,
// permissions, prefixes), so another grant, even of the same principal,
// cannot use it.
func txOwner(g auth.Grant) string {
	sc := slices.Clone(g.Scopes)
	slices.Sort(sc)
	pe := slices.Clone(g.Permissions)
	slices.Sort(pe)
	b, _ := json.Marshal([]any{g.Principal, g.Realm, g.Origin, sc, g.WriteLevel, pe, g.Prefixes, g.Expires.UnixNano()})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// dbErr turns the registry's refusals into typed, audited denials.
func (d *Data) dbErr(g auth.Grant, method, target string, err error) error {
	var ro *sqldb.ReadOnlyError
	switch {
	case errors.As(err, &ro):
		return d.denied(g, method, "read_only",
			fmt.Sprintf("a read-only query: named queries run in a read-only transaction, and the database refused a write (%v)", ro.Err), target)
	case errors.Is(err, sqldb.ErrTxOwner):
		return d.denied(g, method, "owner", "the grant that opened the transaction", target)
	}
	return err
}

func (d *Data) runNamed(ctx context.Context, g auth.Grant, name string, params json.RawMessage, database string, mode sqldb.Mode) (json.RawMessage, error) {
	res, err := d.DB.RunNamed(ctx, name, params, database)
	if err != nil {
		return nil, d.dbErr(g, "db.runNamedQuery", name, err)
	}
	return res.Encode(mode)
}

// sqlDetail shortens SQL for an audit record.
func sqlDetail(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

func (d *Data) runQuery(ctx context.Context, g auth.Grant, sqlText string, args []any, database, tx string) (json.RawMessage, error) {
	target := database
	if tx != "" {
		target = tx
	}
	if err := d.canAudit(); err != nil {
		return nil, err
	}
	var res *sqldb.Result
	var err error
	if tx != "" {
		res, err = d.DB.TxQuery(ctx, txOwner(g), tx, sqlText, args)
	} else {
		res, err = d.DB.Query(ctx, database, sqlText, args)
	}
	if err != nil {
		if de := d.dbErr(g, "db.runQuery", target, err); de != err {
			return nil, de
		}
	}
	var out json.RawMessage
	if err == nil {
		out, err = res.Encode(sqldb.ModeScript)
	}
	return out, d.changed(g, "db.runQuery", target, map[string]string{"sql": sqlDetail(sqlText)}, err)
}

func (d *Data) callProc(ctx context.Context, g auth.Grant, name string, args []any, database, tx string) (json.RawMessage, error) {
	target := database + " " + name
	if tx != "" {
		target = tx + " " + name
	}
	if err := d.canAudit(); err != nil {
		return nil, err
	}
	var res *sqldb.Result
	var err error
	if tx != "" {
		res, err = d.DB.TxCallProc(ctx, txOwner(g), tx, name, args)
	} else {
		res, err = d.DB.CallProc(ctx, database, name, args)
	}
	if err != nil {
		if de := d.dbErr(g, "db.callProc", target, err); de != err {
			return nil, de
		}
	}
	var out json.RawMessage
	if err == nil {
		out, err = res.Encode(sqldb.ModeScript)
	}
	return out, d.changed(g, "db.callProc", target, nil, err)
}

func (d *Data) beginTx(ctx context.Context, g auth.Grant, database, isolation string, timeout time.Duration) (string, error) {
	if err := d.canAudit(); err != nil {
		return "", err
	}
	h, err := d.DB.Begin(ctx, txOwner(g), database, isolation, timeout)
	if err == nil {
		d.txGrants.Store(h, g)
	}
	if database == "" {
		database = sqldb.LocalName
	}
	return h, d.changed(g, "db.beginTransaction", database, map[string]any{"tx": h, "isolation": isolation, "timeout_ms": timeout.Milliseconds()}, err)
}

func (d *Data) endTx(ctx context.Context, g auth.Grant, method, tx string) error {
	if err := d.canAudit(); err != nil {
		return err
	}
	var err error
	owner := txOwner(g)
	switch method {
	case "db.commitTransaction":
		err = d.DB.Commit(ctx, owner, tx)
	case "db.rollbackTransaction":
		err = d.DB.Rollback(ctx, owner, tx)
	default:
		err = d.DB.CloseTx(ctx, owner, tx)
	}
	if err != nil {
		if de := d.dbErr(g, method, tx, err); de != err {
			return de
		}
	} else {
		d.txGrants.Delete(tx)
	}
	return d.changed(g, method, tx, nil, err)
}

// txExpired audits the rollback the registry made of an idle transaction.
func (d *Data) txExpired(info sqldb.TxInfo) {
	g := auth.Grant{Principal: "daemon", Origin: "tx-timeout"}
	if v, ok := d.txGrants.LoadAndDelete(info.Handle); ok {
		g = v.(auth.Grant)
	}
	d.audit(g, "db.rollback_idle", info.Handle, "ok",
		fmt.Sprintf("rolled back by the daemon after %s idle (timeoutMs %d) on %q", info.Timeout, info.Timeout.Milliseconds(), info.Database), nil)
}

// --- history ---

// MaxScriptTrendPoints caps the points of one getTrends call from a
// script (its answer travels in one frame of at most 16 MiB).
const MaxScriptTrendPoints = 300000

func (d *Data) trends(ctx context.Context, g auth.Grant, q store.TrendQuery) ([]store.Trend, error) {
	for _, p := range q.Paths {
		if !g.AllowsPath(p) {
			return nil, d.denied(g, "hist.getTrends", "prefix", "a path inside the grant's prefixes", p)
		}
	}
	return d.History.Query(ctx, q)
}

// --- messages and nested runs ---

type depthKey struct{}

// callDepth is how many nested runs ctx is inside.
func callDepth(ctx context.Context) int {
	n, _ := ctx.Value(depthKey{}).(int)
	return n
}

// nestedDenied is a refusal that happened inside a nested run: it reaches
// the caller as PermissionDenied but is not audited again here (the nested
// run's own refusal was).
type nestedDenied struct{ *auth.DeniedError }

func (e nestedDenied) Unwrap() error { return e.DeniedError }

// runNested runs module.entry for a message handler or runOnGateway: the
// grant is the caller's, intersected with restrict (if any); the depth is
// bounded; the entry's own timeout applies (and the caller's deadline).
func (d *Data) runNested(ctx context.Context, g auth.Grant, what, module, entry string, restrict *auth.Grant, args json.RawMessage) (apitypes.ScriptRun, error) {
	depth := callDepth(ctx) + 1
	if depth > MaxCallDepth {
		return apitypes.ScriptRun{}, fmt.Errorf("%s: call depth limit %d reached (scripts calling scripts); not run", what, MaxCallDepth)
	}
	r, err := d.runner()
	if err != nil {
		return apitypes.ScriptRun{}, err
	}
	ng := g
	if restrict != nil {
		ng = g.Intersect(*restrict)
	}
	if d.EntryRestriction != nil {
		if er, ok := d.EntryRestriction(module, entry); ok {
			ng = ng.Intersect(er)
		}
	}
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	run, err := r.RunScript(context.WithValue(ctx, depthKey{}, depth), ng, module, entry, args)
	if err != nil {
		var se *scriptError
		if errors.As(err, &se) {
			if se.kind == "permission_denied" {
				return run, nestedDenied{&auth.DeniedError{Kind: "nested", Need: se.detail, Target: what}}
			}
			return run, &scriptError{kind: se.kind, detail: fmt.Sprintf("%s (%s.%s) failed: %s", what, module, entry, se.detail)}
		}
		return run, fmt.Errorf("%s (%s.%s): %w", what, module, entry, err)
	}
	return run, nil
}

func (d *Data) sendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (apitypes.ScriptRun, error) {
	h, ok := d.handlers[handler]
	if !ok {
		names := make([]string, 0, len(d.handlers))
		for n := range d.handlers {
			names = append(names, n)
		}
		slices.Sort(names)
		return apitypes.ScriptRun{}, fmt.Errorf("message handler %q: %w (have: %s)", handler, errNotFound, strings.Join(names, ", "))
	}
	return d.runNested(ctx, g, "message handler "+handler, h.Module, h.Entry, h.Restrict, payload)
}

func (d *Data) runOnGateway(ctx context.Context, g auth.Grant, entry string, args json.RawMessage) (apitypes.ScriptRun, error) {
	module, name, ok := strings.Cut(entry, ".")
	if !ok || !moduleRe.MatchString(module) || !moduleRe.MatchString(name) {
		return apitypes.ScriptRun{}, fmt.Errorf("script.runOnGateway: entry %q: want \"module.entry\": %w", entry, errInvalid)
	}
	return d.runNested(ctx, g, "script.runOnGateway "+entry, module, name, nil, args)
}

// Sentinels of the data services, mapped to the API's by the REST adapter.
var (
	errNotFound = errors.New("not found")
	errInvalid  = errors.New("invalid request")
)
