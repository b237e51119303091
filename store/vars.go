package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"sync"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// bucketVars holds system.vars: key → JSON value. Created by the first
// write (as the users bucket is), so files of schema version 1 take it
// without a migration; a missing bucket reads as empty.
var bucketVars = []byte("vars")

// Limits of system.vars (docs/scripting.md, "Python side": system.vars).
const (
	// MaxVarKey is the longest key, in bytes.
	MaxVarKey = 512
	// MaxVarValue is the largest value, in bytes of JSON.
	MaxVarValue = 1 << 20
	// MaxVarList is the most keys Keys and List return; a prefix matching
	// more is refused (wrapping ErrInvalid) rather than truncated.
	MaxVarList = 10000
)

// ErrNotNumber is wrapped by Vars.Incr when the stored value, or by, is not
// a JSON number.
var ErrNotNumber = errors.New("not a number")

// Var is one system.vars entry: its key and its JSON value.
type Var struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Vars is system.vars over the store: JSON values by key, each change
// committed (fsync'd) before the call returns (docs/architecture.md, rules from the field:
// "system.vars is committed before the call returns").
//
// Changes go through one writer goroutine that runs every change waiting
// at that moment in one bbolt transaction (group commit): a change costs one
// commit when alone, and concurrent callers share commits. Incr reads and
// writes inside that transaction, so concurrent increments never lose one.
// Reads use their own short read transactions. Close it before the DB.
type Vars struct {
	db *DB

	mu     sync.Mutex // guards closed and sends on ops
	closed bool
	ops    chan *varsOp
	done   chan struct{}
}

// varsOp is one change waiting for the writer. fn runs inside the batch
// transaction; an *opError it returns fails only this op (it must not have
// changed anything), any other error aborts the whole transaction.
type varsOp struct {
	fn   func(b *bolt.Bucket) (json.RawMessage, error)
	res  json.RawMessage
	err  error
	done chan struct{}
}

// opError is an op's own failure: nothing was changed by it.
type opError struct{ err error }

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// varsBatchMax caps the changes committed in one transaction.
const varsBatchMax = 1024

// NewVars starts system.vars over db.
func NewVars(db *DB) *Vars {
	v := &Vars{db: db, ops: make(chan *varsOp, varsBatchMax), done: make(chan struct{})}
	go v.run()
	return v
}

// Close stops taking changes and waits for the writer to commit the ones
// already submitted (or ctx to end). Calls after Close return ErrClosed.
func (v *Vars) Close(ctx context.Context) error {
	v.mu.Lock()
	if !v.closed {
		v.closed = true
		close(v.ops)
	}
	v.mu.Unlock()
	select {
	case <-v.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: vars close: %w", ctx.Err())
	}
}

func (v *Vars) run() {
	defer close(v.done)
	for op := range v.ops {
		batch := []*varsOp{op}
	drain:
		for len(batch) < varsBatchMax {
			select {
			case o, ok := <-v.ops:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		err := v.db.update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketVars)
			if err != nil {
				return err
			}
			for _, o := range batch {
				o.res, o.err = o.fn(b)
				if o.err != nil {
					if oe := (*opError)(nil); !errors.As(o.err, &oe) {
						return o.err
					}
				}
			}
			return nil
		})
		for _, o := range batch {
			if err != nil {
				o.res, o.err = nil, err
			}
			close(o.done)
		}
	}
}

// submit hands fn to the writer and waits for its commit or ctx. When ctx
// ends first the change may still be committed; the error says so.
func (v *Vars) submit(ctx context.Context, what string, fn func(b *bolt.Bucket) (json.RawMessage, error)) (json.RawMessage, error) {
	op := &varsOp{fn: fn, done: make(chan struct{})}
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil, ErrClosed
	}
	select {
	case v.ops <- op:
		v.mu.Unlock()
	case <-ctx.Done():
		v.mu.Unlock()
		return nil, fmt.Errorf("store: %s: not submitted: %w", what, ctx.Err())
	}
	select {
	case <-op.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("store: %s: gave up waiting for the commit (the change may still be applied): %w", what, ctx.Err())
	}
	if op.err != nil {
		var oe *opError
		if errors.As(op.err, &oe) {
			return nil, fmt.Errorf("store: %s: %w", what, oe.err)
		}
		return nil, fmt.Errorf("store: %s: %w", what, op.err)
	}
	return op.res, nil
}

// checkVarKey refuses keys system.vars does not hold: empty, longer than
// MaxVarKey bytes, not UTF-8, or holding a NUL byte.
func checkVarKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty var key: %w", ErrInvalid)
	case len(key) > MaxVarKey:
		return fmt.Errorf("var key of %d bytes is over %d: %w", len(key), MaxVarKey, ErrInvalid)
	case !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("var key %q is not UTF-8 text without NUL: %w", key, ErrInvalid)
	}
	return nil
}

// compactValue checks that val is one JSON value of at most MaxVarValue
// bytes and returns it compacted.
func compactValue(key string, val json.RawMessage) ([]byte, error) {
	if len(val) > MaxVarValue {
		return nil, fmt.Errorf("var %q: value of %d bytes is over %d: %w", key, len(val), MaxVarValue, ErrInvalid)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, val); err != nil || buf.Len() == 0 {
		return nil, fmt.Errorf("var %q: value is not JSON: %w", key, ErrInvalid)
	}
	return buf.Bytes(), nil
}

// Get returns a copy of key's JSON value and whether it exists.
func (v *Vars) Get(key string) (json.RawMessage, bool, error) {
	if err := checkVarKey(key); err != nil {
		return nil, false, fmt.Errorf("store: vars get: %w", err)
	}
	var out []byte
	err := v.db.view(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketVars); b != nil {
			out = clone(b.Get([]byte(key)))
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: vars get %q: %w", key, err)
	}
	return out, out != nil, nil
}

// Set stores val (one JSON value) under key, committed before it returns.
// An invalid key or a value that is not JSON or is over MaxVarValue wraps
// ErrInvalid and nothing is written.
func (v *Vars) Set(ctx context.Context, key string, val json.RawMessage) error {
	if err := checkVarKey(key); err != nil {
		return fmt.Errorf("store: vars set: %w", err)
	}
	c, err := compactValue(key, val)
	if err != nil {
		return fmt.Errorf("store: vars set: %w", err)
	}
	_, err = v.submit(ctx, fmt.Sprintf("vars set %q", key), func(b *bolt.Bucket) (json.RawMessage, error) {
		return nil, b.Put([]byte(key), c)
	})
	return err
}

// Delete removes key, committed before it returns, and reports whether it
// existed.
func (v *Vars) Delete(ctx context.Context, key string) (bool, error) {
	if err := checkVarKey(key); err != nil {
		return false, fmt.Errorf("store: vars delete: %w", err)
	}
	res, err := v.submit(ctx, fmt.Sprintf("vars delete %q", key), func(b *bolt.Bucket) (json.RawMessage, error) {
		if b.Get([]byte(key)) == nil {
			return json.RawMessage("false"), nil
		}
		return json.RawMessage("true"), b.Delete([]byte(key))
	})
	if err != nil {
		return false, err
	}
	return string(res) == "true", nil
}

// Incr adds by (a JSON number) to the number stored under key (absent
// counts as 0) and returns the new value, committed before it returns. The
// read and the write are one transaction, so concurrent increments are never
// lost. Integers stay integers (int64, overflow refused); a float on either
// side gives a float, as in Python. A stored value or by that is not a
// number wraps ErrNotNumber and nothing is written.
func (v *Vars) Incr(ctx context.Context, key string, by json.Number) (json.RawMessage, error) {
	if err := checkVarKey(key); err != nil {
		return nil, fmt.Errorf("store: vars incr: %w", err)
	}
	if _, err := parseNumber(string(by)); err != nil {
		return nil, fmt.Errorf("store: vars incr %q: by %q: %w", key, by, ErrNotNumber)
	}
	return v.submit(ctx, fmt.Sprintf("vars incr %q", key), func(b *bolt.Bucket) (json.RawMessage, error) {
		cur := b.Get([]byte(key))
		if cur == nil {
			cur = []byte("0")
		}
		sum, err := addNumbers(string(cur), string(by))
		if err != nil {
			return nil, &opError{fmt.Errorf("stored value %.64s: %w", cur, err)}
		}
		return sum, b.Put([]byte(key), sum)
	})
}

// parseNumber parses a JSON number: an int64 when it is an integer in
// range, else a float64. Integers outside int64 are refused (they would
// silently lose precision).
func parseNumber(s string) (any, error) {
	s = strings.TrimSpace(s)
	if s == "" || !json.Valid([]byte(s)) || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return nil, ErrNotNumber
	}
	if !strings.ContainsAny(s, ".eE") {
		n, ok := new(big.Int).SetString(s, 10)
		if !ok || !n.IsInt64() {
			return nil, fmt.Errorf("integer %s outside int64: %w", s, ErrNotNumber)
		}
		return n.Int64(), nil
	}
	var f float64
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil, ErrNotNumber
	}
	return f, nil
}

// addNumbers adds two JSON numbers and returns the sum as JSON.
func addNumbers(a, b string) (json.RawMessage, error) {
	x, err := parseNumber(a)
	if err != nil {
		return nil, err
	}
	y, err := parseNumber(b)
	if err != nil {
		return nil, err
	}
	xi, xok := x.(int64)
	yi, yok := y.(int64)
	if xok && yok {
		s := xi + yi
		if (s > xi) != (yi > 0) {
			return nil, fmt.Errorf("%d + %d overflows int64: %w", xi, yi, ErrInvalid)
		}
		return json.RawMessage(fmt.Sprint(s)), nil
	}
	f := toF(x) + toF(y)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("sum is not finite: %w", ErrInvalid)
	}
	out, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if !bytes.ContainsAny(out, ".eE") {
		out = append(out, ".0"...) // stays a float on the Python side
	}
	return out, nil
}

func toF(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}

// Keys returns the keys beginning with prefix, in byte order. More than
// MaxVarList keys is refused (wrapping ErrInvalid): narrow the prefix.
func (v *Vars) Keys(prefix string) ([]string, error) {
	out := []string{}
	err := v.each(prefix, func(k, _ []byte) {
		out = append(out, string(k))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List returns the entries whose key begins with prefix, in key order.
// More than MaxVarList entries is refused (wrapping ErrInvalid).
func (v *Vars) List(prefix string) ([]Var, error) {
	out := []Var{}
	err := v.each(prefix, func(k, val []byte) {
		out = append(out, Var{Key: string(k), Value: clone(val)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (v *Vars) each(prefix string, fn func(k, v []byte)) error {
	p := []byte(prefix)
	err := v.db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVars)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		n := 0
		for k, val := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, val = c.Next() {
			if n++; n > MaxVarList {
				return fmt.Errorf("more than %d vars begin with %q; use a longer prefix: %w", MaxVarList, prefix, ErrInvalid)
			}
			fn(k, val)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: vars under %q: %w", prefix, err)
	}
	return nil
}
