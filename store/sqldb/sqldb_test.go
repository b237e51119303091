package sqldb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/internal/peers"
	"qubiq.dev/edge/store/storetest"
)

// backend is one database the per-method tests run against.
type backend struct {
	name string // connection name
	pg   bool
}

var backends = []backend{{name: LocalName}, {name: "pg", pg: true}}

// newRegistry opens a registry in a temporary data dir with local and,
// as "pg", a fresh schema on the PostgreSQL test server (dropped at the
// end). A server that cannot be reached fails the test loudly.
func newRegistry(t *testing.T, opts Options) *Registry {
	t.Helper()
	dir := t.TempDir()
	sec, err := LoadSecrets(filepath.Join(dir, KeyFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.DataDir, opts.Secrets = dir, sec
	if opts.Store == nil {
		opts.Store = storetest.MustOpen(t)
	}
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("registry close: %v", err)
		}
	})
	_, dsn := peers.PostgresSchema(t, "qubiq_sqldb_")
	if err := r.Put(Connection{Name: "pg", Driver: DriverPostgres, DSN: NewSecret(dsn)}); err != nil {
		t.Fatal(err)
	}
	return r
}

func mustExec(t *testing.T, r *Registry, database, sqlText string, args ...any) {
	t.Helper()
	if _, err := r.Query(context.Background(), database, sqlText, args); err != nil {
		t.Fatalf("%s: %s: %v", database, sqlText, err)
	}
}

func encode(t *testing.T, res *Result, mode Mode) string {
	t.Helper()
	b, err := res.Encode(mode)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// createBatches makes the batches table of docs/scripting.md's named query
// example, with one column of each type.
func createBatches(t *testing.T, r *Registry, be backend) {
	ddl := `CREATE TABLE batches (id INTEGER PRIMARY KEY, name TEXT, weight DOUBLE PRECISION, ok BOOLEAN,
		blob BYTEA, done TIMESTAMPTZ, note TEXT)`
	if !be.pg {
		ddl = `CREATE TABLE batches (id INTEGER PRIMARY KEY, name TEXT, weight REAL, ok BOOLEAN,
		blob BLOB, done TIMESTAMP, note TEXT)`
	}
	mustExec(t, r, be.name, ddl)
	ph := "?, ?, ?, ?, ?, ?, ?"
	if be.pg {
		ph = "$1, $2, $3, $4, $5, $6, $7"
	}
	done := time.Date(2025, 3, 1, 12, 30, 0, 500000000, time.UTC)
	mustExec(t, r, be.name, "INSERT INTO batches VALUES ("+ph+")", int64(7), "B-7", 12.5, true, []byte{0, 1, 2}, done, nil)
	mustExec(t, r, be.name, "INSERT INTO batches VALUES ("+ph+")", int64(8), "B-8", 3.0, false, []byte{}, done.Add(time.Hour), "x")
}

func TestRegistry_RunNamed_TypesPreserved(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRegistry(t, Options{})
			createBatches(t, r, be)
			q, err := NewNamedQuery("batch_by_id", be.name, "SELECT * FROM batches WHERE id = :id AND done >= :after ORDER BY id",
				map[string]string{"id": "int", "after": "timestamp"})
			if err != nil {
				t.Fatal(err)
			}
			r.SetNamedQueries([]NamedQuery{q})
			res, err := r.RunNamed(context.Background(), "batch_by_id", json.RawMessage(`{"id": 7, "after": {"$dt": "2025-03-01T00:00:00Z"}}`), "")
			if err != nil {
				t.Fatal(err)
			}
			want := `[{"id":7,"name":"B-7","weight":12.5,"ok":true,"blob":{"$bytes":"AAEC"},"done":{"$dt":"2025-03-01T12:30:00.5Z"},"note":null}]`
			if got := encode(t, res, ModeScript); got != want {
				t.Fatalf("script encoding\n got %s\nwant %s", got, want)
			}
			wantREST := `[{"id":7,"name":"B-7","weight":12.5,"ok":true,"blob":"AAEC","done":"2025-03-01T12:30:00.5Z","note":null}]`
			if got := encode(t, res, ModeREST); got != wantREST {
				t.Fatalf("REST encoding\n got %s\nwant %s", got, wantREST)
			}
			// A float column keeps a float that happens to be integral.
			res, err = r.RunNamed(context.Background(), "batch_by_id", json.RawMessage(`{"id": 8, "after": "2025-03-01T00:00:00Z"}`), "")
			if err != nil {
				t.Fatal(err)
			}
			if got := encode(t, res, ModeScript); !strings.Contains(got, `"weight":3.0,"ok":false,"blob":{"$bytes":""}`) {
				t.Fatalf("row 8: %s", got)
			}
		})
	}
}

// TestRegistry_RunNamed_UpdateRefusedReadOnly is the proof: a
// named query whose SQL is an UPDATE fails with a read-only error and
// changes nothing, on both databases.
func TestRegistry_RunNamed_UpdateRefusedReadOnly(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRegistry(t, Options{})
			createBatches(t, r, be)
			qs := []NamedQuery{}
			for name, sqlText := range map[string]string{
				"evil_update": "UPDATE batches SET name = 'hacked' WHERE id = :id",
				"evil_cte":    "WITH x AS (SELECT 1) UPDATE batches SET name = 'hacked' WHERE id = :id",
				"evil_delete": "DELETE FROM batches WHERE id = :id",
			} {
				q, err := NewNamedQuery(name, be.name, sqlText, map[string]string{"id": "int"})
				if err != nil {
					t.Fatal(err)
				}
				qs = append(qs, q)
			}
			r.SetNamedQueries(qs)
			for _, q := range qs {
				_, err := r.RunNamed(context.Background(), q.Name, json.RawMessage(`{"id": 7}`), "")
				var ro *ReadOnlyError
				if !errors.As(err, &ro) || !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "read-only") {
					t.Fatalf("%s: err = %v; want a read-only refusal", q.Name, err)
				}
			}
			res, err := r.Query(context.Background(), be.name, "SELECT name FROM batches ORDER BY id", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := encode(t, res, ModeScript); got != `[{"name":"B-7"},{"name":"B-8"}]` {
				t.Fatalf("after refused writes: %s", got)
			}
			// The pool's connections are writable again afterwards.
			mustExec(t, r, be.name, "UPDATE batches SET note = 'fine' WHERE id = 8")
		})
	}
}

func TestRegistry_RunNamed_ParamErrors(t *testing.T) {
	r := newRegistry(t, Options{})
	createBatches(t, r, backends[0])
	q, err := NewNamedQuery("q", "", "SELECT * FROM batches WHERE id = :id", map[string]string{"id": "int"})
	if err != nil {
		t.Fatal(err)
	}
	r.SetNamedQueries([]NamedQuery{q})
	tests := []struct {
		name, params, want string
		sentinel           error
	}{
		{"missing", `{}`, `missing parameter "id"`, ErrInvalid},
		{"unknown", `{"id": 1, "x": 2}`, `unknown parameter "x"`, ErrInvalid},
		{"float for int", `{"id": 1.5}`, `want an integer`, ErrInvalid},
		{"string for int", `{"id": "1 OR 1=1"}`, `want an integer`, ErrInvalid},
		{"not an object", `[1]`, `params must be an object`, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.RunNamed(context.Background(), "q", json.RawMessage(tt.params), "")
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want %q", err, tt.want)
			}
		})
	}
	if _, err := r.RunNamed(context.Background(), "nope", nil, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown query: %v", err)
	}
	if _, err := r.RunNamed(context.Background(), "q", json.RawMessage(`{"id":1}`), "nodb"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown database: %v", err)
	}
	res, err := r.RunNamed(context.Background(), "q", json.RawMessage(`{"id": null}`), "")
	if err != nil || len(res.Rows) != 0 {
		t.Fatalf("null id: %v, %v", res, err)
	}
}

func TestRegistry_Query_ExecAndRows(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRegistry(t, Options{MaxRows: 3})
			ctx := context.Background()
			mustExec(t, r, be.name, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
			ins := "INSERT INTO t VALUES (?, ?)"
			if be.pg {
				ins = "INSERT INTO t VALUES ($1, $2)"
			}
			res, err := r.Query(ctx, be.name, ins, []any{int64(1), "a"})
			if err != nil || !res.Statement || res.RowsAffected != 1 {
				t.Fatalf("insert: %+v, %v", res, err)
			}
			if got := encode(t, res, ModeScript); got != "1" {
				t.Fatalf("insert encodes as %s; want 1", got)
			}
			res, err = r.Query(ctx, be.name, "INSERT INTO t VALUES (2, 'b'), (3, 'c') RETURNING id", nil)
			if err != nil || encode(t, res, ModeScript) != `[{"id":2},{"id":3}]` {
				t.Fatalf("insert returning: %v, %v", res, err)
			}
			res, err = r.Query(ctx, be.name, "/* c */ -- d\n SELECT count(*) AS n FROM t", nil)
			if err != nil || encode(t, res, ModeScript) != `[{"n":3}]` {
				t.Fatalf("select: %v, %v", res, err)
			}
			mustExec(t, r, be.name, "INSERT INTO t VALUES (4, 'd')")
			if _, err := r.Query(ctx, be.name, "SELECT * FROM t", nil); !errors.Is(err, ErrTooManyRows) {
				t.Fatalf("4 rows with MaxRows 3: %v", err)
			}
			if _, err := r.Query(ctx, be.name, "SELECT * FROM nosuchtable", nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("connection %q", be.name)) {
				t.Fatalf("bad table: %v", err)
			}
		})
	}
}

func TestRegistry_Tx_CommitRollbackOwner(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRegistry(t, Options{})
			ctx := context.Background()
			mustExec(t, r, be.name, "CREATE TABLE t (id INTEGER PRIMARY KEY)")
			count := func() string {
				res, err := r.Query(ctx, be.name, "SELECT count(*) AS n FROM t", nil)
				if err != nil {
					t.Fatal(err)
				}
				return encode(t, res, ModeScript)
			}
			tx, err := r.Begin(ctx, "alice", be.name, "read_committed", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.TxQuery(ctx, "alice", tx, "INSERT INTO t VALUES (1)", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := r.TxQuery(ctx, "mallory", tx, "INSERT INTO t VALUES (2)", nil); !errors.Is(err, ErrTxOwner) {
				t.Fatalf("other owner: %v; want ErrTxOwner", err)
			}
			if err := r.Commit(ctx, "mallory", tx); !errors.Is(err, ErrTxOwner) {
				t.Fatalf("other owner commit: %v", err)
			}
			if err := r.Commit(ctx, "alice", tx); err != nil {
				t.Fatal(err)
			}
			if got := count(); got != `[{"n":1}]` {
				t.Fatalf("after commit %s", got)
			}
			if _, err := r.TxQuery(ctx, "alice", tx, "SELECT 1", nil); !errors.Is(err, ErrTxEnded) || !strings.Contains(err.Error(), "committed") {
				t.Fatalf("use after commit: %v", err)
			}
			if err := r.CloseTx(ctx, "alice", tx); err != nil {
				t.Fatalf("close after commit: %v", err)
			}
			tx2, err := r.Begin(ctx, "alice", be.name, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.TxQuery(ctx, "alice", tx2, "INSERT INTO t VALUES (2)", nil); err != nil {
				t.Fatal(err)
			}
			if err := r.Rollback(ctx, "alice", tx2); err != nil {
				t.Fatal(err)
			}
			tx3, _ := r.Begin(ctx, "alice", be.name, "", 0)
			if _, err := r.TxQuery(ctx, "alice", tx3, "INSERT INTO t VALUES (3)", nil); err != nil {
				t.Fatal(err)
			}
			if err := r.CloseTx(ctx, "alice", tx3); err != nil {
				t.Fatal(err)
			}
			if got := count(); got != `[{"n":1}]` {
				t.Fatalf("after rollback and close %s", got)
			}
			if _, err := r.TxQuery(ctx, "alice", "tx-nope", "SELECT 1", nil); !errors.Is(err, ErrTxUnknown) {
				t.Fatalf("unknown handle: %v", err)
			}
			if _, err := r.Begin(ctx, "alice", be.name, "chaotic", 0); !errors.Is(err, ErrInvalid) {
				t.Fatalf("bad isolation: %v", err)
			}
		})
	}
}

// TestRegistry_Tx_IdleTimeoutRolledBackHandleRefused is the proof:
// a transaction left open past its timeoutMs is rolled back (its writes
// are gone, its connection back in the pool) and its handle is refused
// with an error that says so.
func TestRegistry_Tx_IdleTimeoutRolledBackHandleRefused(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			var mu sync.Mutex
			var expired []TxInfo
			r := newRegistry(t, Options{OnTxExpired: func(i TxInfo) { mu.Lock(); expired = append(expired, i); mu.Unlock() }})
			ctx := context.Background()
			mustExec(t, r, be.name, "CREATE TABLE t (id INTEGER PRIMARY KEY)")
			tx, err := r.Begin(ctx, "alice", be.name, "", 150*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			// Use keeps it alive: the timeout counts from the last use.
			for range 3 {
				time.Sleep(80 * time.Millisecond)
				if _, err := r.TxQuery(ctx, "alice", tx, "SELECT 1 AS one", nil); err != nil {
					t.Fatalf("use within the timeout: %v", err)
				}
			}
			if _, err := r.TxQuery(ctx, "alice", tx, "INSERT INTO t VALUES (1)", nil); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(r.OpenTx()) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			_, err = r.TxQuery(ctx, "alice", tx, "SELECT 1", nil)
			if !errors.Is(err, ErrTxExpired) || !strings.Contains(err.Error(), "rolled back by the daemon") || !strings.Contains(err.Error(), "timeoutMs 150") {
				t.Fatalf("use after the timeout: %v", err)
			}
			if err := r.Commit(ctx, "alice", tx); !errors.Is(err, ErrTxExpired) {
				t.Fatalf("commit after the timeout: %v", err)
			}
			if err := r.CloseTx(ctx, "alice", tx); !errors.Is(err, ErrTxExpired) {
				t.Fatalf("close after the timeout: %v", err)
			}
			res, err := r.Query(ctx, be.name, "SELECT count(*) AS n FROM t", nil)
			if err != nil || encode(t, res, ModeScript) != `[{"n":0}]` {
				t.Fatalf("rolled back writes still there: %v, %v", res, err)
			}
			_, db, _ := r.openConn(be.name)
			if st := db.Stats(); st.InUse != 0 {
				t.Fatalf("%d connections still in use after the rollback", st.InUse)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(expired) != 1 || expired[0].Handle != tx || expired[0].Owner != "alice" {
				t.Fatalf("OnTxExpired got %+v", expired)
			}
		})
	}
}

func TestRegistry_CallProc(t *testing.T) {
	r := newRegistry(t, Options{})
	ctx := context.Background()
	mustExec(t, r, "pg", "CREATE TABLE log (v INTEGER)")
	mustExec(t, r, "pg", "CREATE FUNCTION add_two(a integer, b integer) RETURNS TABLE(sum integer) AS $$ SELECT a + b $$ LANGUAGE sql")
	mustExec(t, r, "pg", "CREATE PROCEDURE put_log(x integer) AS $$ INSERT INTO log VALUES (x) $$ LANGUAGE sql")
	res, err := r.CallProc(ctx, "pg", "add_two", []any{int64(2), int64(3)})
	if err != nil || encode(t, res, ModeScript) != `[{"sum":5}]` {
		t.Fatalf("function: %v, %v", res, err)
	}
	tx, _ := r.Begin(ctx, "o", "pg", "", 0)
	if _, err := r.TxCallProc(ctx, "o", tx, "put_log", []any{int64(9)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(ctx, "o", tx); err != nil {
		t.Fatal(err)
	}
	res, _ = r.Query(ctx, "pg", "SELECT v FROM log", nil)
	if encode(t, res, ModeScript) != `[{"v":9}]` {
		t.Fatalf("procedure did not run: %v", res)
	}
	if _, err := r.CallProc(ctx, "pg", "nosuch", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown proc: %v", err)
	}
	if _, err := r.CallProc(ctx, "pg", "x; DROP TABLE log", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := r.CallProc(ctx, LocalName, "p", nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no stored procedures") {
		t.Fatalf("sqlite: %v", err)
	}
}

// TestRegistry_Secrets_SealedAtRestNeverShown: the DSN is not in the store
// in clear, opens only with the key, and shows nowhere.
func TestRegistry_Secrets_SealedAtRestNeverShown(t *testing.T) {
	dir := t.TempDir()
	st := storetest.MustOpen(t)
	sec, err := LoadSecrets(filepath.Join(dir, KeyFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v; want 0600", fi.Mode().Perm())
	}
	const dsn = "postgres://plant:S3cretPassw0rd@10.0.0.9:1/plant?sslmode=disable&connect_timeout=1"
	r, err := Open(Options{DataDir: dir, Secrets: sec, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Put(Connection{Name: "plantdb", Driver: DriverPostgres, DSN: NewSecret(dsn)}); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Connections()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(recs["plantdb"], []byte("S3cret")) || bytes.Contains(recs["plantdb"], []byte("plant:")) {
		t.Fatalf("stored record holds the DSN in clear: %s", recs["plantdb"])
	}
	raw, _ := os.ReadFile(st.Path())
	if bytes.Contains(raw, []byte("S3cretPassw0rd")) {
		t.Fatal("the store file holds the password in clear")
	}
	// The connection fails (nothing listens): the error names it, not the
	// password.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = r.Query(ctx, "plantdb", "SELECT 1", nil)
	if err == nil || strings.Contains(err.Error(), "S3cretPassw0rd") || !strings.Contains(err.Error(), `"plantdb"`) {
		t.Fatalf("error %v: want one naming the connection, without the password", err)
	}
	for _, s := range []string{fmt.Sprint(NewSecret(dsn)), fmt.Sprintf("%#v %+v %v", NewSecret(dsn), Connection{DSN: NewSecret(dsn)}, NewSecret(dsn))} {
		if strings.Contains(s, "S3cret") {
			t.Fatalf("a Secret printed: %s", s)
		}
	}
	if b, _ := json.Marshal(Connection{DSN: NewSecret(dsn)}); bytes.Contains(b, []byte("S3cret")) {
		t.Fatalf("a Secret marshalled: %s", b)
	}
	if info := fmt.Sprint(r.Connections()); strings.Contains(info, "S3cret") {
		t.Fatal("Connections shows the DSN")
	}
	r.Close()
	// Reopen: the sealed record opens with the same key...
	r2, err := Open(Options{DataDir: dir, Secrets: sec, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := r2.conn("plantdb"); c.dsn.Reveal() != dsn {
		t.Fatal("DSN did not round-trip")
	}
	r2.Close()
	// ... and not with another.
	other, err := LoadSecrets(filepath.Join(t.TempDir(), KeyFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{DataDir: dir, Secrets: other, Store: st}); !errors.Is(err, ErrSecretUnreadable) {
		t.Fatalf("open with another key: %v", err)
	}
	// A wrong-size key file is refused.
	bad := filepath.Join(t.TempDir(), KeyFile)
	os.WriteFile(bad, []byte("short"), 0o600)
	if _, err := LoadSecrets(bad, nil); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func TestRewritePlaceholders(t *testing.T) {
	tests := []struct {
		in, want, names string
	}{
		{"SELECT * FROM t WHERE id = :id", "SELECT * FROM t WHERE id = $1", "id"},
		{"a = :x AND b = :y OR c = :x", "a = $1 AND b = $2 OR c = $1", "x,y"},
		{"SELECT ':nope', \":nope\", x::int, :real -- :c\n/* :d */", "SELECT ':nope', \":nope\", x::int, $1 -- :c\n/* :d */", "real"},
		{"SELECT 'it''s :x' || :y", "SELECT 'it''s :x' || $1", "y"},
		{"SELECT $$ :x $$, $t$ :y $t$, :z", "SELECT $$ :x $$, $t$ :y $t$, $1", "z"},
		{"SELECT a:b", "SELECT a:b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, names := rewritePlaceholders(tt.in, func(n int) string { return fmt.Sprintf("$%d", n) })
			if got != tt.want || strings.Join(names, ",") != tt.names {
				t.Fatalf("got %q %v; want %q %s", got, names, tt.want, tt.names)
			}
		})
	}
}

func TestParseProjectSections_ErrorsNameEntryAndLine(t *testing.T) {
	doc := `
connections:
  - {name: plantdb, driver: postgres, dsn_file: plant.dsn}
  - {name: local, driver: sqlite, path: x.db}
  - {name: bad, driver: mysql, dsn_file: x}
  - {name: extra, driver: postgres, dsn_file: x, password: oops}
named_queries:
  - {name: batch_by_id, database: local, sql: "SELECT * FROM batches WHERE id = :id", params: {id: int}}
  - {name: untyped, sql: "SELECT :a, :b", params: {a: int, c: string}}
  - {name: weird, sql: "SELECT :a", params: {a: decimal}}
`
	var root struct {
		Connections  []yaml.Node `yaml:"connections"`
		NamedQueries []yaml.Node `yaml:"named_queries"`
	}
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	conns, err := ParseConnections("/etc/qubiq/project.yaml", root.Connections)
	if len(conns) != 1 || conns[0].Name != "plantdb" || conns[0].DSNFile != "/etc/qubiq/plant.dsn" || conns[0].Line != 3 {
		t.Fatalf("connections %+v", conns)
	}
	for _, want := range []string{
		`project.yaml:4: connection "local": "local" is the built-in`,
		`project.yaml:5: connection "bad": unknown driver "mysql"`,
		`project.yaml:6: connection: `, `field password not found`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("connections error %v; want %q", err, want)
		}
	}
	qs, err := ParseNamedQueries("/etc/qubiq/project.yaml", root.NamedQueries)
	if len(qs) != 1 || qs[0].Name != "batch_by_id" || qs[0].Line != 8 {
		t.Fatalf("named queries %+v", qs)
	}
	for _, want := range []string{
		`project.yaml:9: named query "untyped": `, `placeholder :b has no type`, `parameter "c" is not used`,
		`project.yaml:10: named query "weird": parameter "a": unknown type "decimal"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("named queries error %v; want %q", err, want)
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	args, err := DecodeArgs(json.RawMessage(`[1, 2.5, "s", true, null, {"$dt": "2025-03-01T12:00:00+01:00"}, {"$bytes": "AAE="}, 9223372036854775807]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(1), 2.5, "s", true, nil, time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC), []byte{0, 1}, int64(9223372036854775807)}
	if fmt.Sprint(args) != fmt.Sprint(want) {
		t.Fatalf("args %v; want %v", args, want)
	}
	for _, bad := range []string{`[[1]]`, `[{"a": 1}]`, `[{"$dt": "yesterday"}]`, `[18446744073709551616]`, `{"a":1}`} {
		if _, err := DecodeArgs(json.RawMessage(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("DecodeArgs(%s) = %v; want ErrInvalid", bad, err)
		}
	}
}
