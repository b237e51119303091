// Package store is QUBIQ Edge's persistent state in one bbolt file
// (`<data_dir>/qubiq.db`, docs/config.md "Data directory"): the schema version and
// its migrations, the project configuration document, meta values, the last
// value of every tag, API keys, versioned scripts, the audit log, users and
// sessions, system.vars (Vars), tag history (History: a group-committed
// journal folded into per-tag blocks) and the sealed records of system.db's
// connections (store/sqldb holds the SQL side).
//
// Who may import it: daemon (which wires it), api and mqtt reach it through
// interfaces they define, never through bbolt. store imports bbolt, value and
// auth only; it must not import api, sandbox, mqtt, device or tagengine
// (docs/architecture.md, "Layout and dependency direction"; checked by deps_test.go).
//
// # Rules it keeps
//
//   - Open always passes a file-lock timeout to bbolt (bbolt's default of 0
//     waits forever). A second opener of the same file, in this process or
//     another, fails within Options.Timeout with an error wrapping ErrInUse
//     that says "database is in use by another process" and names the file
//     (docs/config.md, "store"; bbolt README, "Opening a database").
//   - Every byte slice returned by this package is a copy: nothing aliases
//     bbolt's memory map, which is only valid inside its transaction.
//   - Ordered keys are 8-byte big-endian integers (audit sequence numbers,
//     script versions), never decimal strings, so that a cursor returns 9,
//     10, 11 in numeric order: bbolt orders keys by their bytes, and as
//     decimal strings "10" and "11" would come before "9".
//   - Every write is committed (fsync'd) before the call returns, except
//     history samples, which are group-committed (History.Flush waits for
//     them) and never dropped without being counted.
//
// # Caveats
//
// bbolt never shrinks its file: deleting data frees pages for reuse by later
// writes, but the file keeps its size until an offline compaction
// (docs/config.md, "store"; bbolt README, "Caveats & Limitations"). Long read
// transactions keep freed pages from being reused, so readers that walk a
// large range use short transactions.
package store
