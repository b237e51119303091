package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"modernc.org/sqlite"
)

// Sentinel errors; the errors returned wrap them with the subject.
var (
	// ErrNotFound is wrapped for an unknown connection or named query.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly is wrapped (by a *ReadOnlyError) when a named query
	// tried to write and the database refused it.
	ErrReadOnly = errors.New("read-only: the database refused a write")
	// ErrTooManyRows is wrapped when a result has more than
	// Options.MaxRows rows.
	ErrTooManyRows = errors.New("result too large")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("sqldb: registry closed")
)

// ReadOnlyError is a named query's write attempt that the database
// refused (PostgreSQL SQLSTATE 25006, SQLite SQLITE_READONLY under
// query_only). It wraps ErrReadOnly and the driver's error.
type ReadOnlyError struct {
	Query string
	Err   error
}

// Error says the query ran read-only and what the database answered.
func (e *ReadOnlyError) Error() string {
	return fmt.Sprintf("named query %q tried to write: named queries run in a read-only transaction and the database refused it (%v)", e.Query, e.Err)
}

// Unwrap returns ErrReadOnly and the driver's error.
func (e *ReadOnlyError) Unwrap() []error { return []error{ErrReadOnly, e.Err} }

// ConnStore keeps the sealed connection records (store.DB implements it):
// rec is opaque to the store.
type ConnStore interface {
	PutConnection(name string, rec []byte) error
	DeleteConnection(name string) error
	Connections() (map[string][]byte, error)
}

// Options configures Open. Zero limits take their defaults.
type Options struct {
	// DataDir holds local.sqlite and the files of sqlite connections.
	DataDir string
	// Secrets seals the DSNs (LoadSecrets of <data_dir>/secrets.key).
	Secrets *Secrets
	// Store keeps the sealed connection records; nil keeps them in memory.
	Store ConnStore
	// Logger receives the registry's logs (never a DSN); nil discards.
	Logger *slog.Logger
	// MaxRows caps the rows of one result (default 100,000).
	MaxRows int
	// MaxTx caps the open transactions (default 64).
	MaxTx int
	// MaxTxTimeout caps a transaction's idle timeout (default 1 h).
	MaxTxTimeout time.Duration
	// OnTxExpired, when set, is called (in its own goroutine) after the
	// registry rolled back a transaction left idle past its timeout.
	OnTxExpired func(TxInfo)
}

// Defaults of Options.
const (
	DefaultMaxRows      = 100000
	DefaultMaxTx        = 64
	DefaultMaxTxTimeout = time.Hour
	// LocalFile is the file of the local connection in the data dir.
	LocalFile = "local.sqlite"
)

// ConnInfo describes a connection without its secret.
type ConnInfo struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
}

// Registry is the connection registry of system.db. Its methods are safe
// for concurrent use.
type Registry struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	closed bool
	conns  map[string]*conn
	named  map[string]NamedQuery
	txs    map[string]*txEntry
	ended  map[string]endedTx
}

type conn struct {
	name, driver string
	dsn          Secret
	once         sync.Once
	db           *sql.DB
	err          error
	dir          string
}

// storedConn is a connection record as kept by the ConnStore.
type storedConn struct {
	Driver string `json:"driver"`
	Sealed []byte `json:"sealed"`
}

// Open loads the stored connections (opening their sealed DSNs) and adds
// local, the SQLite file <data_dir>/local.sqlite. Databases are connected
// on first use, so an unreachable server does not stop the daemon.
func Open(opts Options) (*Registry, error) {
	if opts.MaxRows <= 0 {
		opts.MaxRows = DefaultMaxRows
	}
	if opts.MaxTx <= 0 {
		opts.MaxTx = DefaultMaxTx
	}
	if opts.MaxTxTimeout <= 0 {
		opts.MaxTxTimeout = DefaultMaxTxTimeout
	}
	if opts.Secrets == nil {
		return nil, errors.New("sqldb: open: no Secrets")
	}
	if opts.DataDir == "" {
		return nil, errors.New("sqldb: open: no data directory")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{opts: opts, log: log, conns: map[string]*conn{}, named: map[string]NamedQuery{},
		txs: map[string]*txEntry{}, ended: map[string]endedTx{}}
	r.conns[LocalName] = &conn{name: LocalName, driver: DriverSQLite, dsn: NewSecret(LocalFile), dir: opts.DataDir}
	if opts.Store != nil {
		recs, err := opts.Store.Connections()
		if err != nil {
			return nil, fmt.Errorf("sqldb: load connections: %w", err)
		}
		for name, rec := range recs {
			var sc storedConn
			if err := json.Unmarshal(rec, &sc); err != nil {
				return nil, fmt.Errorf("sqldb: connection %q: stored record unreadable: %w", name, err)
			}
			dsn, err := opts.Secrets.Open(name, sc.Sealed)
			if err != nil {
				return nil, err
			}
			r.conns[name] = &conn{name: name, driver: sc.Driver, dsn: dsn, dir: opts.DataDir}
		}
	}
	return r, nil
}

// Put adds or replaces a connection: its DSN is sealed and stored, then it
// is used from the next call on. local cannot be replaced. A connection
// whose driver and DSN are unchanged keeps its open pool.
func (r *Registry) Put(c Connection) error {
	if !nameRe.MatchString(c.Name) || c.Name == LocalName {
		return fmt.Errorf("sqldb: connection name %q: %w", c.Name, ErrInvalid)
	}
	if c.Driver != DriverPostgres && c.Driver != DriverSQLite {
		return fmt.Errorf("sqldb: connection %q: unknown driver %q: %w", c.Name, c.Driver, ErrInvalid)
	}
	if c.DSN.IsZero() {
		return fmt.Errorf("sqldb: connection %q: empty DSN: %w", c.Name, ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if old := r.conns[c.Name]; old != nil && old.driver == c.Driver && old.dsn == c.DSN {
		return nil
	}
	if r.opts.Store != nil {
		sealed, err := r.opts.Secrets.Seal(c.Name, c.DSN)
		if err != nil {
			return err
		}
		rec, err := json.Marshal(storedConn{Driver: c.Driver, Sealed: sealed})
		if err != nil {
			return err
		}
		if err := r.opts.Store.PutConnection(c.Name, rec); err != nil {
			return fmt.Errorf("sqldb: store connection %q: %w", c.Name, err)
		}
	}
	old := r.conns[c.Name]
	r.conns[c.Name] = &conn{name: c.Name, driver: c.Driver, dsn: c.DSN, dir: r.opts.DataDir}
	if old != nil {
		go old.close(r.log) // transactions on it keep their connection until they end
	}
	r.log.Info("connection registered", slog.String("connection", c.Name), slog.String("driver", c.Driver))
	return nil
}

// Delete removes a connection (not local). A missing one wraps
// ErrNotFound.
func (r *Registry) Delete(name string) error {
	if name == LocalName {
		return fmt.Errorf("sqldb: connection %q cannot be deleted: %w", name, ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.conns[name]
	if old == nil {
		return fmt.Errorf("sqldb: connection %q: %w", name, ErrNotFound)
	}
	if r.opts.Store != nil {
		if err := r.opts.Store.DeleteConnection(name); err != nil {
			return fmt.Errorf("sqldb: delete connection %q: %w", name, err)
		}
	}
	delete(r.conns, name)
	go old.close(r.log)
	return nil
}

// Connections lists the connections, sorted by name, without secrets.
func (r *Registry) Connections() []ConnInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ConnInfo, 0, len(r.conns))
	for _, c := range r.conns {
		out = append(out, ConnInfo{Name: c.name, Driver: c.driver})
	}
	slices.SortFunc(out, func(a, b ConnInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SetNamedQueries replaces the named queries.
func (r *Registry) SetNamedQueries(qs []NamedQuery) {
	m := make(map[string]NamedQuery, len(qs))
	for _, q := range qs {
		m[q.Name] = q
	}
	r.mu.Lock()
	r.named = m
	r.mu.Unlock()
}

// NamedQuery returns the named query called name.
func (r *Registry) NamedQuery(name string) (NamedQuery, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.named[name]
	return q, ok
}

// Close rolls back every open transaction and closes every connection.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	txs := r.txs
	r.txs = map[string]*txEntry{}
	conns := r.conns
	r.mu.Unlock()
	for _, e := range txs {
		e.timer.Stop()
		e.mu.Lock()
		if err := e.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			r.log.Warn("transaction rollback at close failed", slog.String("tx", e.info.Handle), slog.Any("err", err))
		}
		e.cancel()
		e.mu.Unlock()
	}
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.close(r.log))
	}
	return errors.Join(errs...)
}

func (c *conn) close(log *slog.Logger) error {
	var err error
	c.once.Do(func() { c.err = ErrClosed })
	if c.db != nil {
		if err = c.db.Close(); err != nil {
			log.Warn("connection close failed", slog.String("connection", c.name), slog.Any("err", scrubErr(err, c.dsn)))
		}
	}
	return err
}

// open returns the connection's pool, opening it on first use.
func (c *conn) open() (*sql.DB, error) {
	c.once.Do(func() {
		switch c.driver {
		case DriverSQLite:
			path := filepath.Join(c.dir, c.dsn.Reveal())
			c.db, c.err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
			if c.err == nil {
				c.db.SetMaxOpenConns(4)
				c.db.SetConnMaxIdleTime(5 * time.Minute)
			}
		case DriverPostgres:
			c.db, c.err = sql.Open("pgx", c.dsn.Reveal())
			if c.err == nil {
				c.db.SetMaxOpenConns(8)
				c.db.SetMaxIdleConns(2)
				c.db.SetConnMaxIdleTime(5 * time.Minute)
			}
		default:
			c.err = fmt.Errorf("unknown driver %q", c.driver)
		}
	})
	if c.err != nil {
		return nil, fmt.Errorf("connection %q: %w", c.name, scrubErr(c.err, c.dsn))
	}
	return c.db, nil
}

// conn returns the connection called name ("" is local).
func (r *Registry) conn(name string) (*conn, error) {
	if name == "" {
		name = LocalName
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	c := r.conns[name]
	if c == nil {
		return nil, fmt.Errorf("sqldb: connection %q: %w (have %s)", name, ErrNotFound, strings.Join(r.namesLocked(), ", "))
	}
	return c, nil
}

func (r *Registry) namesLocked() []string {
	var out []string
	for n := range r.conns {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// wrapErr names the connection and scrubs the DSN from a driver error.
func (c *conn) wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("connection %q: %s: %w", c.name, what, scrubErr(err, c.dsn))
}

// placeholder writes the n-th positional parameter in the driver's syntax.
func (c *conn) placeholder(n int) string {
	if c.driver == DriverPostgres {
		return fmt.Sprintf("$%d", n)
	}
	return fmt.Sprintf("?%d", n)
}

// RunNamed runs the named query name with params (a JSON object of the
// query's parameters, each converted to its declared type) on database
// (empty: the query's own) in a read-only transaction the database
// enforces, and returns its rows. A query that tries to write fails with a
// *ReadOnlyError and changes nothing.
func (r *Registry) RunNamed(ctx context.Context, name string, params json.RawMessage, database string) (*Result, error) {
	q, ok := r.NamedQuery(name)
	if !ok {
		return nil, fmt.Errorf("sqldb: named query %q: %w", name, ErrNotFound)
	}
	var ps map[string]json.RawMessage
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &ps); err != nil {
			return nil, fmt.Errorf("sqldb: named query %q: params must be an object of name → value: %w", name, ErrInvalid)
		}
	}
	var errs []error
	args := make([]any, len(q.order))
	for i, p := range q.order {
		raw, ok := ps[p]
		if !ok {
			errs = append(errs, fmt.Errorf("missing parameter %q (%s)", p, q.Params[p]))
			continue
		}
		v, err := convertParam(p, q.Params[p], raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		args[i] = v
	}
	for p := range ps {
		if _, ok := q.Params[p]; !ok {
			errs = append(errs, fmt.Errorf("unknown parameter %q (the query takes %s)", p, strings.Join(q.order, ", ")))
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, fmt.Errorf("sqldb: named query %q: %w: %w", name, errors.Join(errs...), ErrInvalid)
	}
	if database == "" {
		database = q.Database
	}
	c, err := r.conn(database)
	if err != nil {
		return nil, err
	}
	db, err := c.open()
	if err != nil {
		return nil, err
	}
	sqlText, _ := rewritePlaceholders(q.SQL, c.placeholder)
	res, err := r.readOnly(ctx, c, db, func(tx *sql.Tx) (*Result, error) {
		return r.query(ctx, c, tx, sqlText, args)
	})
	if err != nil && isReadOnlyErr(err) {
		return nil, &ReadOnlyError{Query: name, Err: err}
	}
	return res, err
}

// readOnly runs fn in a read-only transaction enforced by the database,
// rolled back afterwards.
func (r *Registry) readOnly(ctx context.Context, c *conn, db *sql.DB, fn func(tx *sql.Tx) (*Result, error)) (*Result, error) {
	if c.driver == DriverPostgres {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, c.wrapErr("begin read only", err)
		}
		defer tx.Rollback() // read-only: nothing to keep
		return fn(tx)
	}
	cn, err := db.Conn(ctx)
	if err != nil {
		return nil, c.wrapErr("connect", err)
	}
	defer cn.Close()
	if _, err := cn.ExecContext(ctx, "PRAGMA query_only = ON"); err != nil {
		return nil, c.wrapErr("pragma query_only", err)
	}
	res, ferr := func() (*Result, error) {
		tx, err := cn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, c.wrapErr("begin", err)
		}
		defer tx.Rollback()
		return fn(tx)
	}()
	if _, err := cn.ExecContext(context.WithoutCancel(ctx), "PRAGMA query_only = OFF"); err != nil {
		// Never hand a query_only connection back to the pool.
		if rerr := cn.Raw(func(any) error { return driver.ErrBadConn }); rerr != nil && !errors.Is(rerr, driver.ErrBadConn) {
			r.log.Warn("could not discard a query_only connection", slog.String("connection", c.name), slog.Any("err", rerr))
		}
		r.log.Warn("query_only not reset; connection discarded", slog.String("connection", c.name), slog.Any("err", err))
	}
	return res, ferr
}

// isReadOnlyErr reports whether err is the database refusing a write in
// a read-only transaction.
func isReadOnlyErr(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "25006" // read_only_sql_transaction
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == 8 // SQLITE_READONLY
	}
	return false
}

// querier is what runs SQL: a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Query runs sql with positional args (? for SQLite, $1 for PostgreSQL) on
// database (empty: local), outside any transaction: rows for a statement
// that returns them, else the number of rows affected.
func (r *Registry) Query(ctx context.Context, database, sqlText string, args []any) (*Result, error) {
	c, db, err := r.openConn(database)
	if err != nil {
		return nil, err
	}
	return r.run(ctx, c, db, sqlText, args)
}

func (r *Registry) openConn(database string) (*conn, *sql.DB, error) {
	c, err := r.conn(database)
	if err != nil {
		return nil, nil, err
	}
	db, err := c.open()
	if err != nil {
		return nil, nil, err
	}
	return c, db, nil
}

// run executes a statement: as a query when it returns rows
// (returnsRows), else as an exec.
func (r *Registry) run(ctx context.Context, c *conn, q querier, sqlText string, args []any) (*Result, error) {
	if strings.TrimSpace(sqlText) == "" {
		return nil, fmt.Errorf("sqldb: empty sql: %w", ErrInvalid)
	}
	if returnsRows(sqlText) {
		return r.query(ctx, c, q, sqlText, args)
	}
	res, err := q.ExecContext(ctx, sqlText, args...)
	if err != nil {
		return nil, c.wrapErr("exec", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		n = -1
	}
	return &Result{Statement: true, RowsAffected: n}, nil
}

var (
	firstWordRe = regexp.MustCompile(`^(?is)(?:\s+|--[^\n]*\n?|/\*.*?\*/|\()*([a-z]+)`)
	returningRe = regexp.MustCompile(`(?i)\breturning\b`)
)

// returnsRows reports whether a statement gives rows: it begins with
// SELECT, WITH, VALUES, SHOW, EXPLAIN, PRAGMA or TABLE, or has a RETURNING
// clause.
func returnsRows(sqlText string) bool {
	m := firstWordRe.FindStringSubmatch(sqlText)
	if m == nil {
		return false
	}
	switch strings.ToLower(m[1]) {
	case "select", "with", "values", "show", "explain", "pragma", "table":
		return true
	}
	stripped, _ := rewritePlaceholders(sqlText, func(int) string { return "" })
	return returningRe.MatchString(stripStrings(stripped))
}

// stripStrings blanks '...' literals so keywords inside them do not count.
func stripStrings(s string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			in = !in
			continue
		}
		if !in {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// query runs a row-returning statement and collects at most MaxRows rows,
// with each column's values normalised to keep their types.
func (r *Registry) query(ctx context.Context, c *conn, q querier, sqlText string, args []any) (*Result, error) {
	rows, err := q.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, c.wrapErr("query", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, c.wrapErr("columns", err)
	}
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, c.wrapErr("column types", err)
	}
	res := &Result{Columns: cols, Types: make([]string, len(cols)), Rows: [][]any{}}
	for i, ct := range cts {
		res.Types[i] = strings.ToUpper(ct.DatabaseTypeName())
	}
	for rows.Next() {
		if len(res.Rows) >= r.opts.MaxRows {
			return nil, fmt.Errorf("sqldb: connection %q: more than %d rows; add a LIMIT or filter: %w", c.name, r.opts.MaxRows, ErrTooManyRows)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, c.wrapErr("scan", err)
		}
		for i, v := range vals {
			vals[i] = normalize(v, res.Types[i])
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrapErr("rows", err)
	}
	return res, nil
}

// normalize maps a scanned value onto the types Result holds, using the
// column's declared type where the driver cannot tell (SQLite booleans,
// PostgreSQL JSON).
func normalize(v any, dbType string) any {
	switch x := v.(type) {
	case nil, bool, float64, string:
		return x
	case int64:
		if dbType == "BOOLEAN" || dbType == "BOOL" {
			return x != 0
		}
		return x
	case time.Time:
		return x.UTC()
	case []byte:
		if dbType == "JSON" || dbType == "JSONB" {
			if json.Valid(x) {
				return json.RawMessage(slices.Clone(x))
			}
		}
		return slices.Clone(x)
	case float32:
		return float64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	}
	return fmt.Sprint(v)
}

var procNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// CallProc calls the stored procedure or function name with positional
// args on database (PostgreSQL: CALL for a procedure, SELECT * FROM for a
// function). SQLite has no stored procedures: an error says so.
func (r *Registry) CallProc(ctx context.Context, database, name string, args []any) (*Result, error) {
	c, db, err := r.openConn(database)
	if err != nil {
		return nil, err
	}
	return r.callProc(ctx, c, db, name, args)
}

func (r *Registry) callProc(ctx context.Context, c *conn, q querier, name string, args []any) (*Result, error) {
	if !procNameRe.MatchString(name) {
		return nil, fmt.Errorf("sqldb: procedure name %q: want name or schema.name: %w", name, ErrInvalid)
	}
	if c.driver != DriverPostgres {
		return nil, fmt.Errorf("sqldb: connection %q (SQLite) has no stored procedures: %w", c.name, ErrInvalid)
	}
	schema, proc, ok := strings.Cut(name, ".")
	if !ok {
		schema, proc = "", name
	}
	kind, err := r.query(ctx, c, q, `SELECT p.prokind::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = lower($1) AND (($2 = '' AND n.nspname = ANY (current_schemas(false))) OR n.nspname = lower($2)) LIMIT 1`,
		[]any{proc, schema})
	if err != nil {
		return nil, err
	}
	if len(kind.Rows) == 0 {
		return nil, fmt.Errorf("sqldb: connection %q: no procedure or function %q: %w", c.name, name, ErrNotFound)
	}
	ph := make([]string, len(args))
	for i := range args {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	if kind.Rows[0][0] == "p" {
		res, err := r.query(ctx, c, q, "CALL "+name+"("+strings.Join(ph, ", ")+")", args)
		if err != nil {
			return nil, err
		}
		if len(res.Columns) == 0 {
			return &Result{Statement: true, RowsAffected: 0}, nil
		}
		return res, nil
	}
	return r.query(ctx, c, q, "SELECT * FROM "+name+"("+strings.Join(ph, ", ")+")", args)
}
