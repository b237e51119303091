// Package sqldb holds the SQL connections of system.db (docs/scripting.md, "Python
// side" and "Project file": connections, named_queries): a registry of
// named connections, the embedded SQLite connection `local`
// (<data_dir>/local.sqlite, modernc.org/sqlite) that always exists, and
// PostgreSQL connections (github.com/jackc/pgx/v5 through database/sql).
//
// # Rules it keeps
//
//   - Connection secrets (DSNs) are stored only sealed with AES-256-GCM
//     under <data_dir>/secrets.key (docs/config.md, "Data directory"), bound to
//     the connection's name. They are held in memory as a Secret, which
//     prints, logs and marshals as "[redacted]"; errors that could quote a
//     DSN are scrubbed of it. No method returns a DSN.
//   - Named queries run in a read-only transaction the database enforces:
//     PostgreSQL BEGIN READ ONLY, SQLite PRAGMA query_only on the
//     connection for the duration. Their parameters are typed in the
//     project and bound, never spliced into the SQL.
//   - A transaction handle is bound to its owner (the grant that opened it)
//     and rolled back by the registry after its idle timeout; the handle is
//     refused afterwards with an error that says so (ErrTxExpired).
//   - Results keep their types: int, float, text, bytes, bool, NULL and
//     timestamps (UTC), encoded for scripts with tagged JSON objects
//     ({"$dt": ...}, {"$bytes": ...}); see sandbox/METHODS.md.
//
// Who may import it: daemon. It imports no other package of the project.
package sqldb
