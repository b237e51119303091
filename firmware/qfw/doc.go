// Package qfw is the firmware bundle format of QUBIQ Edge (docs/appliance.md,
// "Flashing" and "Signing keys"): a gzip'd tar whose first entry is
// manifest.json (version, arch, min_from_version, store schema, every
// file's path, size, mode and SHA-256), then manifest.sig (ed25519 over
// "qubiq-fw-v1\n" + the manifest, naming the key), then the slot's files.
// It builds, signs, re-signs and verifies bundles, and makes and reads
// signing keys and trusted-keys files. It links the standard library only,
// so qubiqctl (firmware keygen|sign) and qubiq-slot can use it; package
// firmware flashes bundles into the A/B slots.
package qfw
