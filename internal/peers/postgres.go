package peers

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// PostgresEnv names the environment variable that overrides the DSN of the
// PostgreSQL test server (the Makefile exports it).
const PostgresEnv = "QUBIQ_TEST_PG_DSN"

// DefaultPostgresDSN is the PostgreSQL test server: the system server on
// its standard port, with the role and database scripts/ensure-deps.sh
// makes (`make test` installs and starts it where it is missing).
const DefaultPostgresDSN = "postgres://qubiq_test:qubiq_test@127.0.0.1:5432/qubiq_test?sslmode=disable"

// PostgresDSN returns the DSN of the PostgreSQL test server: $QUBIQ_TEST_PG_DSN,
// else DefaultPostgresDSN.
func PostgresDSN() string {
	if d := os.Getenv(PostgresEnv); d != "" {
		return d
	}
	return DefaultPostgresDSN
}

// PostgresSchema creates a schema of its own for t on the PostgreSQL test
// server, named prefix followed by 12 random hex digits, drops it (CASCADE)
// when t ends, and returns its name and a DSN whose search_path is it. A
// server that cannot be reached within 10 s fails t: it never skips.
func PostgresSchema(t testing.TB, prefix string) (schema, dsn string) {
	t.Helper()
	base := PostgresDSN()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		t.Fatalf("PostgreSQL test server not reachable at %s (make test starts it: see the Makefile's deps-system): %v", redact(base), err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		db.Close()
		t.Fatal(err)
	}
	schema = prefix + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		db.Close()
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return schema, base + sep + "search_path=" + schema
}

// redact hides the password of a postgres:// DSN for a message.
func redact(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	cred, host, ok := strings.Cut(rest, "@")
	if !ok {
		return dsn
	}
	user, _, _ := strings.Cut(cred, ":")
	return scheme + "://" + user + ":***@" + host
}
