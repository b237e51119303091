// Package firmware is QUBIQ Edge's signed firmware bundles and the flash
// that installs them into the A/B slots (docs/appliance.md, "Flashing"),
// after RAUC and Mender: the signature and every hash are checked before
// anything is written to a slot, downgrades are refused unless forced,
// another architecture always, and a power cut at any moment leaves a slot
// that boots.
//
// A bundle, qubiq-<version>-<arch>.qfw, is a gzip-compressed tar whose
// first entry is manifest.json (Manifest: version, architecture, minimum
// version it may upgrade from, store schema, and the path, size, mode and
// SHA-256 of every file of the slot), the second manifest.sig (an ed25519
// signature over "qubiq-fw-v1\n" + the manifest's bytes, naming the key),
// and the rest the slot's files under slot/.
//
// Two steps, two processes:
//
//   - Flash (the daemon, behind POST /api/v1/firmware): streams the upload
//     with a size limit and progress, checks the signature against the
//     trusted keys (/etc/qubiq/trusted-firmware-keys) before it writes a
//     byte, then every hash while it spools the bundle into
//     <data_dir>/firmware, and stages it as pending. The daemon then exits
//     (status 75) for systemd to restart it.
//   - InstallPending (qubiq-slot boot, the unit's privileged ExecStartPre):
//     checks the pending bundle again, unpacks it into a staging directory
//     beside the inactive slot, fsyncs it, swaps it in by renames, puts the
//     slot on trial and switches current (slots.BeginTrial). The daemon
//     never needs write access to /usr/lib/qubiq.
//
// Keygen, Build and Resign are for release managers (qubiqctl firmware
// keygen|sign, make bundle). The production signing key is never in the
// repository; packaging/keys holds a development key for tests.
//
// It imports slots and nothing else of the project.
package firmware
