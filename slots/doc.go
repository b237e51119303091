// Package slots is the appliance's A/B firmware slots (docs/appliance.md,
// "Layout" and "Rollback"), after the model of RAUC and Mender: two slot
// directories <root>/slots/a and <root>/slots/b (root /usr/lib/qubiq on an
// appliance), a symlink <root>/current naming the active one, and the
// state in <data_dir>/slots.json: the active slot, whether it is on trial,
// its boot count and limit, the slot to go back to, and the result of the
// last flash, confirmation or rollback.
//
// # Rules it keeps
//
//   - Every write is atomic and durable: slots.json is written to a
//     temporary file, fsync'd, renamed into place and its directory
//     fsync'd; `current` is swapped by making a new symlink and renaming it
//     over the old one. A power cut leaves the old or the new file, never a
//     mix.
//   - slots.json is the authority; `current` follows it. Boot repairs a
//     `current` that disagrees (a power cut between the two writes).
//   - A slot on trial that was started more than its boot limit times
//     without the daemon confirming health is switched back (Boot, run by
//     qubiq-slot as the unit's ExecStartPre), and the reason recorded.
//   - Data across slots: before a trial slot whose store schema is newer
//     than the store file first starts, Boot snapshots the store with a
//     bbolt read-transaction copy; a rollback puts that snapshot back, so
//     the old version never meets a schema it does not know. A slot that
//     still finds a newer schema is refused with a message saying what to
//     do (SchemaError).
//
// It imports store (schema version, file copy) and nothing else of the
// project; firmware builds on it.
package slots
