package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/files"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
)

// The data operations. Each exists once: the system.* methods (methods.go)
// call the unexported ones, whose errors keep the texts scripts have
// always seen; the gateway.Data operations call the same ones and map
// their errors onto the gateway's sentinels (kinded).

// errNotFound is wrapped by the data services for what does not exist.
var errNotFound = errors.New("not found")

// kinded maps a data service error onto the gateway's sentinels (keeping
// its text): invalid arguments ErrInvalid, missing things ErrNotFound,
// closed or full queues ErrUnavailable; refusals (*auth.DeniedError) and
// script failures pass as they are.
func kinded(err error) error {
	var de *auth.DeniedError
	var se *gateway.ScriptError
	switch {
	case err == nil, errors.As(err, &de), errors.As(err, &se), errors.Is(err, gateway.ErrUnavailable),
		errors.Is(err, gateway.ErrInvalid), errors.Is(err, gateway.ErrNotFound):
		return err
	case errors.Is(err, errNotFound), errors.Is(err, sqldb.ErrNotFound), errors.Is(err, files.ErrNotFound),
		errors.Is(err, store.ErrNotFound):
		return gateway.Errorf(gateway.ErrNotFound, "%s", ownWords(err))
	case errors.Is(err, sandbox.ErrBadArgs), errors.Is(err, sqldb.ErrInvalid), errors.Is(err, store.ErrInvalid),
		errors.Is(err, store.ErrNotNumber), errors.Is(err, files.ErrTooLarge), errors.Is(err, files.ErrIsDir),
		errors.Is(err, files.ErrBadRange), errors.Is(err, sqldb.ErrTooManyRows):
		return gateway.Errorf(gateway.ErrInvalid, "%s", ownWords(err))
	case errors.Is(err, store.ErrAuditFull), errors.Is(err, store.ErrClosed), errors.Is(err, sqldb.ErrClosed):
		return gateway.Errorf(gateway.ErrUnavailable, "%s", ownWords(err))
	}
	return err
}

// ownWords is err's text without the label of the layer that raised it
// ("store: "): the caller of the service names a var, a file or a script,
// not the package keeping it. The kind travels beside the text
// (gateway.Errorf), so it is not written into it either.
func ownWords(err error) string {
	return strings.TrimPrefix(err.Error(), "store: ")
}

// canChange refuses a changing call whose audit record could not be queued
// (fail closed); the error wraps gateway.ErrUnavailable.
func (d *data) canChange() error {
	if err := d.s.canAudit(); err != nil {
		return fmt.Errorf("refused, nothing changed: %w; retry", err)
	}
	return nil
}

// audit queues one record of a changing call or a refusal; after, when not
// nil, is its JSON detail.
func (d *data) audit(g auth.Grant, action, target, result, detail string, after any) {
	rec := record(g, action, target, result, detail)
	if after != nil {
		if b, err := json.Marshal(after); err == nil {
			rec.After = b
		}
	}
	d.s.enqueue(rec)
}

// changed audits a changing call with its outcome and returns err.
func (d *data) changed(g auth.Grant, action, target string, after any, err error) error {
	result, detail := "ok", ""
	if err != nil {
		result, detail = "error", err.Error()
		after = nil
	}
	d.audit(g, action, target, result, detail, after)
	return err
}

// denied builds a typed refusal, audits it once and returns it.
func (d *data) denied(g auth.Grant, method, kind, need, target string) error {
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

func (d *data) varsSet(ctx context.Context, g auth.Grant, key string, val json.RawMessage) error {
	if err := d.canChange(); err != nil {
		return err
	}
	return d.changed(g, "vars.set", key, small(val), d.vars.Set(ctx, key, val))
}

func (d *data) varsDelete(ctx context.Context, g auth.Grant, key string) (bool, error) {
	if err := d.canChange(); err != nil {
		return false, err
	}
	ok, err := d.vars.Delete(ctx, key)
	return ok, d.changed(g, "vars.delete", key, map[string]bool{"existed": ok}, err)
}

func (d *data) varsIncr(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error) {
	if by == "" {
		by = "1"
	}
	if err := d.canChange(); err != nil {
		return nil, err
	}
	v, err := d.vars.Incr(ctx, key, by)
	return v, d.changed(g, "vars.incr", key, map[string]json.RawMessage{"by": json.RawMessage(by), "value": v}, err)
}

// GetVar returns key's value (gateway.Data).
func (s *Service) GetVar(_ context.Context, _ auth.Grant, key string) (json.RawMessage, error) {
	v, ok, err := s.data.vars.Get(key)
	if err != nil {
		return nil, kinded(err)
	}
	if !ok {
		return nil, fmt.Errorf("var %q: %w", key, gateway.ErrNotFound)
	}
	return v, nil
}

// SetVar stores a var, committed before it returns (gateway.Data).
func (s *Service) SetVar(ctx context.Context, g auth.Grant, key string, v json.RawMessage) error {
	return kinded(s.data.varsSet(ctx, g, key, v))
}

// DeleteVar removes a var (gateway.Data).
func (s *Service) DeleteVar(ctx context.Context, g auth.Grant, key string) error {
	ok, err := s.data.varsDelete(ctx, g, key)
	if err != nil {
		return kinded(err)
	}
	if !ok {
		return fmt.Errorf("var %q: %w", key, gateway.ErrNotFound)
	}
	return nil
}

// IncrVar adds to a numeric var (gateway.Data).
func (s *Service) IncrVar(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error) {
	v, err := s.data.varsIncr(ctx, g, key, by)
	return v, kinded(err)
}

// VarKeys lists var keys by prefix (gateway.Data).
func (s *Service) VarKeys(_ context.Context, _ auth.Grant, prefix string) ([]string, error) {
	keys, err := s.data.vars.Keys(prefix)
	return keys, kinded(err)
}

// ListVars lists vars by prefix (gateway.Data).
func (s *Service) ListVars(_ context.Context, _ auth.Grant, prefix string) ([]gateway.Var, error) {
	list, err := s.data.vars.List(prefix)
	if err != nil {
		return nil, kinded(err)
	}
	out := make([]gateway.Var, len(list))
	for i, v := range list {
		out[i] = gateway.Var{Key: v.Key, Value: v.Value}
	}
	return out, nil
}

// --- files ---

// filesErr turns a path refusal into a typed, audited denial.
func (d *data) filesErr(g auth.Grant, method, path string, err error) error {
	if errors.Is(err, files.ErrInvalidPath) {
		return d.denied(g, method, "path", "a path inside the files root ("+strings.TrimPrefix(err.Error(), "files: ")+")", path)
	}
	return err
}

func (d *data) filesRead(g auth.Grant, path string) ([]byte, error) {
	b, err := d.files.Read(path)
	return b, d.filesErr(g, "files.read", path, err)
}

func (d *data) filesSize(g auth.Grant, path string) (int64, error) {
	n, err := d.files.Size(path)
	return n, d.filesErr(g, "files.size", path, err)
}

func (d *data) filesChunk(g auth.Grant, path string, off, n int64) ([]byte, error) {
	b, err := d.files.ReadChunk(path, off, n)
	return b, d.filesErr(g, "files.readChunk", path, err)
}

func (d *data) filesSave(g auth.Grant, path string, b []byte) error {
	if _, err := files.CleanPath(path); err != nil {
		return d.filesErr(g, "files.save", path, err)
	}
	if err := d.canChange(); err != nil {
		return err
	}
	err := d.files.Save(path, b)
	if errors.Is(err, files.ErrInvalidPath) {
		return d.filesErr(g, "files.save", path, err)
	}
	return d.changed(g, "files.save", path, map[string]int{"bytes": len(b)}, err)
}

func (d *data) filesDelete(g auth.Grant, path string) error {
	if _, err := files.CleanPath(path); err != nil {
		return d.filesErr(g, "files.delete", path, err)
	}
	if err := d.canChange(); err != nil {
		return err
	}
	err := d.files.Delete(path)
	if errors.Is(err, files.ErrInvalidPath) {
		return d.filesErr(g, "files.delete", path, err)
	}
	return d.changed(g, "files.delete", path, nil, err)
}

// ReadFile returns a file of the files root, whole or a chunk
// (gateway.Data).
func (s *Service) ReadFile(_ context.Context, g auth.Grant, path string, off, n int64) ([]byte, error) {
	var b []byte
	var err error
	if n < 0 {
		b, err = s.data.filesRead(g, path)
	} else {
		b, err = s.data.filesChunk(g, path, off, n)
	}
	return b, kinded(err)
}

// FileSize returns a file's size (gateway.Data).
func (s *Service) FileSize(_ context.Context, g auth.Grant, path string) (int64, error) {
	n, err := s.data.filesSize(g, path)
	return n, kinded(err)
}

// SaveFile writes a file atomically (gateway.Data).
func (s *Service) SaveFile(_ context.Context, g auth.Grant, path string, b []byte) error {
	return kinded(s.data.filesSave(g, path, b))
}

// DeleteFile removes a file (gateway.Data).
func (s *Service) DeleteFile(_ context.Context, g auth.Grant, path string) error {
	return kinded(s.data.filesDelete(g, path))
}

// MaxFileBytes is the largest file SaveFile takes (gateway.Data).
func (s *Service) MaxFileBytes() int64 { return s.data.files.Limits().MaxFileBytes }

// --- db ---

// txOwner is the owner a transaction handle is bound to: a digest of the
// whole grant that opened it (principal, realm, origin, scopes, level,
// permissions, prefixes, expiry), so another grant, even of the same
// principal, cannot use it.
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
func (d *data) dbErr(g auth.Grant, method, target string, err error) error {
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

func (d *data) runNamed(ctx context.Context, g auth.Grant, name string, params json.RawMessage, database string, mode sqldb.Mode) (json.RawMessage, error) {
	res, err := d.sql.RunNamed(ctx, name, params, database)
	if err != nil {
		return nil, d.dbErr(g, "db.runNamedQuery", name, err)
	}
	return res.Encode(mode)
}

// RunNamedQuery runs a named query read-only (gateway.Data).
func (s *Service) RunNamedQuery(ctx context.Context, g auth.Grant, q gateway.NamedQuery) (json.RawMessage, error) {
	mode := sqldb.ModeREST
	if q.Encoding == gateway.RowsTagged {
		mode = sqldb.ModeScript
	}
	rows, err := s.data.runNamed(ctx, g, q.Name, q.Params, q.Database, mode)
	return rows, kinded(err)
}

// sqlDetail shortens SQL for an audit record.
func sqlDetail(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

func (d *data) runQuery(ctx context.Context, g auth.Grant, sqlText string, args []any, database, tx string) (json.RawMessage, error) {
	target := database
	if tx != "" {
		target = tx
	}
	if err := d.canChange(); err != nil {
		return nil, err
	}
	var res *sqldb.Result
	var err error
	if tx != "" {
		res, err = d.sql.TxQuery(ctx, txOwner(g), tx, sqlText, args)
	} else {
		res, err = d.sql.Query(ctx, database, sqlText, args)
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

func (d *data) callProc(ctx context.Context, g auth.Grant, name string, args []any, database, tx string) (json.RawMessage, error) {
	target := database + " " + name
	if tx != "" {
		target = tx + " " + name
	}
	if err := d.canChange(); err != nil {
		return nil, err
	}
	var res *sqldb.Result
	var err error
	if tx != "" {
		res, err = d.sql.TxCallProc(ctx, txOwner(g), tx, name, args)
	} else {
		res, err = d.sql.CallProc(ctx, database, name, args)
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

func (d *data) beginTx(ctx context.Context, g auth.Grant, database, isolation string, timeout time.Duration) (string, error) {
	if err := d.canChange(); err != nil {
		return "", err
	}
	h, err := d.sql.Begin(ctx, txOwner(g), database, isolation, timeout)
	if err == nil {
		d.txGrants.Store(h, g)
	}
	if database == "" {
		database = sqldb.LocalName
	}
	return h, d.changed(g, "db.beginTransaction", database, map[string]any{"tx": h, "isolation": isolation, "timeout_ms": timeout.Milliseconds()}, err)
}

func (d *data) endTx(ctx context.Context, g auth.Grant, method, tx string) error {
	if err := d.canChange(); err != nil {
		return err
	}
	var err error
	owner := txOwner(g)
	switch method {
	case "db.commitTransaction":
		err = d.sql.Commit(ctx, owner, tx)
	case "db.rollbackTransaction":
		err = d.sql.Rollback(ctx, owner, tx)
	default:
		err = d.sql.CloseTx(ctx, owner, tx)
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
func (d *data) txExpired(info sqldb.TxInfo) {
	g := auth.Grant{Principal: "daemon", Origin: "tx-timeout"}
	if v, ok := d.txGrants.LoadAndDelete(info.Handle); ok {
		g = v.(auth.Grant)
	}
	d.audit(g, "db.rollback_idle", info.Handle, "ok",
		fmt.Sprintf("rolled back by the daemon after %s idle (timeoutMs %d) on %q", info.Timeout, info.Timeout.Milliseconds(), info.Database), nil)
}

// --- history ---

func (d *data) trends(ctx context.Context, g auth.Grant, q store.TrendQuery) ([]store.Trend, error) {
	for _, p := range q.Paths {
		if !g.AllowsPath(p) {
			return nil, d.denied(g, "hist.getTrends", "prefix", "a path inside the grant's prefixes", p)
		}
	}
	return d.history.Query(ctx, q)
}

// History answers a history query (gateway.Data).
func (s *Service) History(ctx context.Context, g auth.Grant, q gateway.HistoryQuery) ([]gateway.HistorySeries, error) {
	agg := q.Aggregate
	if agg == "" {
		agg = string(store.AggRaw)
	}
	trs, err := s.data.trends(ctx, g, store.TrendQuery{Paths: q.Paths, Start: q.Start, End: q.End,
		Interval: q.Interval, Aggregate: store.Aggregate(agg)})
	if err != nil {
		return nil, kinded(err)
	}
	out := make([]gateway.HistorySeries, len(trs))
	for i, tr := range trs {
		hs := gateway.HistorySeries{Path: tr.Path, Aggregate: string(tr.Aggregate), Interval: tr.Interval, Bad: tr.Bad, Known: tr.Known,
			Points: make([]gateway.HistoryPoint, len(tr.Points))}
		for j, p := range tr.Points {
			hs.Points[j] = gateway.HistoryPoint{Time: p.Time, Value: p.Value, Quality: p.Quality, StatusCode: p.StatusCode}
		}
		out[i] = hs
	}
	return out, nil
}
