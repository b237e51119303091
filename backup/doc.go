// Package backup writes and restores appliance backups (docs/appliance.md,
// "Backup and restore"), after Ignition's gateway backups: one file holding
// a consistent snapshot of the store taken while the daemon runs (a bbolt
// read transaction), the project files, system.files' root, the trusted
// OPC UA certificates and the connection secrets' key, each entry hashed,
// and the whole signed when a key is given.
//
// A backup is a gzip-compressed tar: the entries first (store/qubiq.db,
// project/..., files/..., pki/trusted/..., secrets/...), then
// backup.json (Manifest: every entry's size and SHA-256) and, when signed,
// backup.sig (ed25519 over "qubiq-backup-v1\n" + backup.json). The manifest
// comes last so a running daemon can stream a backup without a temporary
// copy.
//
// Restore goes into a fresh data directory only: it stages every entry,
// checks every hash (and the signature), opens the store (migrating an
// older schema, refusing a newer one), runs bbolt's consistency check,
// drops the old appliance's API keys, sessions and bootstrap token unless
// asked to keep them, and seals the connection secrets again under the new
// appliance's secrets.key. Only then does it move the files into place.
//
// It imports store, store/sqldb and firmware (its key format) of the
// project; daemon (the API's backup route, at start-up for a staged
// restore) and cmd/ call it.
package backup
