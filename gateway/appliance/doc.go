// Package appliance implements gateway.Appliance: the appliance's own
// operations behind the front doors (docs/appliance.md). It flashes signed
// firmware bundles through package firmware (the daemon's half: verify,
// stage, ask for a restart; qubiq-slot installs at the next start), shows
// the A/B slots of package slots, streams backups and stages restores
// through package backup, and changes the log level of the running daemon
// (a slog.LevelVar). Every change, accepted or refused, is audited.
//
// Settings parses the daemon config's firmware and log sections. Only the
// daemon builds an Appliance; front doors reach it through
// gateway.Appliance.
package appliance
