package sqldb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Transaction errors; the errors returned wrap them with the handle.
var (
	// ErrTxExpired is wrapped when a handle names a transaction the
	// registry rolled back because it was idle past its timeout. The
	// message says when and after how long.
	ErrTxExpired = errors.New("transaction rolled back by the daemon after its idle timeout")
	// ErrTxEnded is wrapped when a handle names a transaction that was
	// already committed, rolled back or closed.
	ErrTxEnded = errors.New("transaction already ended")
	// ErrTxUnknown is wrapped when a handle was never issued (or was
	// forgotten long ago).
	ErrTxUnknown = errors.New("unknown transaction handle")
	// ErrTxOwner is wrapped when a handle is used by another owner than
	// the one that opened it (a different grant). The daemon reports it as
	// a permission refusal.
	ErrTxOwner = errors.New("transaction belongs to another caller")
	// ErrTooManyTx is wrapped when Options.MaxTx transactions are open.
	ErrTooManyTx = errors.New("too many open transactions")
)

// TxInfo describes an open or ended transaction (for logs and audit).
type TxInfo struct {
	Handle   string
	Owner    string
	Database string
	Timeout  time.Duration
	Began    time.Time
}

type txEntry struct {
	info   TxInfo
	tx     *sql.Tx
	c      *conn
	cancel context.CancelFunc
	timer  *time.Timer
	busy   int        // calls using it now (guarded by Registry.mu)
	mu     sync.Mutex // serialises the calls on the transaction
}

type endedTx struct {
	why  string // "committed", "rolled back", "closed", "expired"
	at   time.Time
	info TxInfo
}

// Ended handles are remembered this long (and at most this many), so a
// late use gets a precise error.
const (
	endedKeep = time.Hour
	endedMax  = 4096
)

// DefaultTxTimeout is beginTransaction's default idle timeout (docs/scripting.md, system.db:
// timeoutMs=60000).
const DefaultTxTimeout = 60 * time.Second

// isolationLevels maps isolation names (any case; "TRANSACTION_" prefix
// and spaces allowed) to database/sql levels.
var isolationLevels = map[string]sql.IsolationLevel{
	"":                 sql.LevelDefault,
	"read_uncommitted": sql.LevelReadUncommitted,
	"read_committed":   sql.LevelReadCommitted,
	"repeatable_read":  sql.LevelRepeatableRead,
	"serializable":     sql.LevelSerializable,
}

// Begin opens a transaction on database (empty: local) for owner and
// returns its handle. isolation is "", read_uncommitted, read_committed,
// repeatable_read or serializable (SQLite transactions are always
// serializable and take any of them). timeout is the idle timeout (zero:
// DefaultTxTimeout; at most Options.MaxTxTimeout): a transaction not used
// for that long is rolled back by the registry and its handle refused with
// ErrTxExpired.
func (r *Registry) Begin(ctx context.Context, owner, database, isolation string, timeout time.Duration) (string, error) {
	iso := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(isolation), " ", "_"))
	iso = strings.TrimPrefix(iso, "transaction_")
	level, ok := isolationLevels[iso]
	if !ok {
		return "", fmt.Errorf("sqldb: isolation %q: want read_uncommitted, read_committed, repeatable_read or serializable: %w", isolation, ErrInvalid)
	}
	switch {
	case timeout == 0:
		timeout = DefaultTxTimeout
	case timeout < 0:
		return "", fmt.Errorf("sqldb: transaction timeout %s must be positive: %w", timeout, ErrInvalid)
	case timeout > r.opts.MaxTxTimeout:
		return "", fmt.Errorf("sqldb: transaction timeout %s is over the maximum %s: %w", timeout, r.opts.MaxTxTimeout, ErrInvalid)
	}
	c, db, err := r.openConn(database)
	if err != nil {
		return "", err
	}
	if c.driver == DriverSQLite {
		level = sql.LevelDefault
	}
	r.mu.Lock()
	n := len(r.txs)
	r.mu.Unlock()
	if n >= r.opts.MaxTx {
		return "", fmt.Errorf("sqldb: %d transactions open; commit or close some: %w", n, ErrTooManyTx)
	}
	// The transaction outlives this call: database/sql rolls a
	// transaction back when its BeginTx context ends, so it gets its own.
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tx, err := db.BeginTx(txCtx, &sql.TxOptions{Isolation: level})
	if err != nil {
		cancel()
		return "", c.wrapErr("begin", err)
	}
	var rb [12]byte
	if _, err := rand.Read(rb[:]); err != nil {
		tx.Rollback()
		cancel()
		return "", err
	}
	handle := "tx-" + hex.EncodeToString(rb[:])
	e := &txEntry{info: TxInfo{Handle: handle, Owner: owner, Database: c.name, Timeout: timeout, Began: time.Now()},
		tx: tx, c: c, cancel: cancel}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		tx.Rollback()
		cancel()
		return "", ErrClosed
	}
	r.txs[handle] = e
	e.timer = time.AfterFunc(timeout, func() { r.expire(handle) })
	r.mu.Unlock()
	return handle, nil
}

// expire rolls back an idle transaction (its timer fired).
func (r *Registry) expire(handle string) {
	r.mu.Lock()
	e := r.txs[handle]
	if e == nil || e.busy > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.txs, handle)
	r.endLocked(e, "expired")
	r.mu.Unlock()
	e.mu.Lock()
	err := e.tx.Rollback()
	e.cancel()
	e.mu.Unlock()
	r.log.Warn("transaction idle past its timeout; rolled back", slog.String("tx", handle),
		slog.String("connection", e.info.Database), slog.Duration("timeout", e.info.Timeout), slog.Any("rollback_err", err))
	if r.opts.OnTxExpired != nil {
		go r.opts.OnTxExpired(e.info)
	}
}

func (r *Registry) endLocked(e *txEntry, why string) {
	now := time.Now()
	if len(r.ended) >= endedMax {
		var oldest string
		var at time.Time
		for h, x := range r.ended {
			if now.Sub(x.at) > endedKeep {
				delete(r.ended, h)
				continue
			}
			if oldest == "" || x.at.Before(at) {
				oldest, at = h, x.at
			}
		}
		if len(r.ended) >= endedMax {
			delete(r.ended, oldest)
		}
	}
	r.ended[e.info.Handle] = endedTx{why: why, at: now, info: e.info}
}

// acquire finds an open transaction for owner and marks it in use (its
// idle timer stopped).
func (r *Registry) acquire(owner, handle string) (*txEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.txs[handle]
	if e == nil {
		if x, ok := r.ended[handle]; ok {
			if x.info.Owner != owner {
				return nil, fmt.Errorf("sqldb: transaction %s: %w", handle, ErrTxOwner)
			}
			if x.why == "expired" {
				return nil, fmt.Errorf("sqldb: transaction %s was rolled back by the daemon at %s after %s idle (timeoutMs %d); nothing it did was committed: %w",
					handle, x.at.UTC().Format(time.RFC3339), x.info.Timeout, x.info.Timeout.Milliseconds(), ErrTxExpired)
			}
			return nil, fmt.Errorf("sqldb: transaction %s was already %s: %w", handle, x.why, ErrTxEnded)
		}
		return nil, fmt.Errorf("sqldb: transaction %q: %w", handle, ErrTxUnknown)
	}
	if e.info.Owner != owner {
		return nil, fmt.Errorf("sqldb: transaction %s: %w", handle, ErrTxOwner)
	}
	e.busy++
	e.timer.Stop()
	return e, nil
}

// release ends a use; end names how the transaction ended ("" while it
// stays open, which restarts its idle timer).
func (r *Registry) release(e *txEntry, end string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.busy--
	if end != "" {
		if r.txs[e.info.Handle] == e {
			delete(r.txs, e.info.Handle)
			r.endLocked(e, end)
		}
		e.timer.Stop()
		return
	}
	if e.busy == 0 && r.txs[e.info.Handle] == e {
		e.timer.Reset(e.info.Timeout)
	}
}

// TxQuery runs sql with args inside the transaction handle (see Query).
func (r *Registry) TxQuery(ctx context.Context, owner, handle, sqlText string, args []any) (*Result, error) {
	e, err := r.acquire(owner, handle)
	if err != nil {
		return nil, err
	}
	defer r.release(e, "")
	e.mu.Lock()
	defer e.mu.Unlock()
	return r.run(ctx, e.c, e.tx, sqlText, args)
}

// TxCallProc calls a procedure inside the transaction handle (see
// CallProc).
func (r *Registry) TxCallProc(ctx context.Context, owner, handle, name string, args []any) (*Result, error) {
	e, err := r.acquire(owner, handle)
	if err != nil {
		return nil, err
	}
	defer r.release(e, "")
	e.mu.Lock()
	defer e.mu.Unlock()
	return r.callProc(ctx, e.c, e.tx, name, args)
}

// TxDatabase returns the connection name of an open transaction of owner.
func (r *Registry) TxDatabase(owner, handle string) (string, error) {
	e, err := r.acquire(owner, handle)
	if err != nil {
		return "", err
	}
	r.release(e, "")
	return e.info.Database, nil
}

// Commit commits the transaction; its handle is refused afterwards.
func (r *Registry) Commit(ctx context.Context, owner, handle string) error {
	return r.finish(owner, handle, "commit", "committed", func(tx *sql.Tx) error { return tx.Commit() })
}

// Rollback rolls the transaction back; its handle is refused afterwards.
func (r *Registry) Rollback(ctx context.Context, owner, handle string) error {
	return r.finish(owner, handle, "rollback", "rolled back", func(tx *sql.Tx) error { return tx.Rollback() })
}

// CloseTx ends the transaction, rolling back what was not committed. A
// handle already committed, rolled back or closed closes again without
// error; an expired or unknown handle, or another owner's, is refused.
func (r *Registry) CloseTx(ctx context.Context, owner, handle string) error {
	err := r.finish(owner, handle, "close", "closed", func(tx *sql.Tx) error { return tx.Rollback() })
	if errors.Is(err, ErrTxEnded) {
		return nil
	}
	return err
}

func (r *Registry) finish(owner, handle, op, how string, fn func(*sql.Tx) error) error {
	e, err := r.acquire(owner, handle)
	if err != nil {
		return err
	}
	e.mu.Lock()
	ferr := fn(e.tx)
	e.cancel()
	e.mu.Unlock()
	r.release(e, how)
	if ferr != nil && !errors.Is(ferr, sql.ErrTxDone) {
		return e.c.wrapErr(op, ferr)
	}
	return nil
}

// OpenTx returns the open transactions (for health and tests).
func (r *Registry) OpenTx() []TxInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]TxInfo, 0, len(r.txs))
	for _, e := range r.txs {
		out = append(out, e.info)
	}
	return out
}
