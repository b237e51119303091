// Package opcua is the OPC UA client driver of QUBIQ Edge, registered as
// "opcua" (device.Register from init; device/all imports it).
//
// It owns the driver config (Config, decoded strictly from the project
// file's device entry; the daemon sets pki_dir), the tag address notations
// (ParseAddress: nsu=<uri>;s=Name, ns=2;i=5, i=2258), the mapping of every
// built-in type onto the values of package value and back (reads, and
// writes coerced to the node's DataType), the one table from status codes
// to the contract's qualities (StatusQuality), the certificate store
// (pki_dir/own, trusted, rejected; ListCerts, TrustCert, RejectCert),
// sessions with their keep-alive and reconnection, subscriptions with
// monitored items (Subscribe, SubscribeWith), and Browse.
//
// It uses github.com/gopcua/opcua v0.8.0 for encoding, the secure channel
// and the session services, and does the rest in its own layer because of
// that version's known faults (docs/opcua.md, "Faults from the field"), each named where it is
// handled:
//
//   - No trust list: the server certificate from the unauthenticated
//     GetEndpoints answer is checked against pki_dir/trusted (thumbprint,
//     or chain to a trusted CA, and validity dates) before a secure
//     channel is opened with it; an unknown one is parked in
//     pki_dir/rejected (checkServerCert; docs/architecture.md, Rules from the field).
//   - A certificate chain in ServerCertificate is split and only the leaf
//     handed to gopcua (C19); the OpenSecureChannel response is parsed by
//     gopcua and a chain there still fails inside it (reported, not
//     patched).
//   - The reconnect monitor of Client.Connect closes the session it has
//     just restored and resumes nothing (C11), and re-created
//     subscriptions keep stale numeric node ids (C14) and lose every item
//     when one fails (C12): the driver never calls Connect, runs its own
//     reconnect loop (re-activate the old session on a new channel first,
//     else a new session), its own publish loop with a silence watchdog,
//     and re-resolves nsu= addresses through the namespace array of every
//     session.
//   - The monitor package fails a whole batch for one bad node id (C13):
//     monitored items are created with CreateMonitoredItems and each
//     result inspected.
//   - CreateSession may return a nil session with a nil error and
//     ActivateSession may return nil without activating (connect).
//   - A request whose context ends before it is written has already taken
//     the channel's next sequence number; the gap makes the server close
//     the secure channel. Every service call goes through guarded, which
//     never lets the caller's context cancel a request before it is sent.
//
// A connection counts its live monitored items against the configured ones
// (Server.GetMonitoredItems) and rebuilds what is missing; a node that
// vanished marks only its tag Bad_NodeIdUnknown and is retried (C12).
//
// # Caveats
//
//   - gopcua logs a few failures with the standard library's global logger
//     (log.Printf); the driver cannot route them to its slog.Logger.
//   - Arrays of ByteString whose elements differ in length cannot be
//     written (gopcua v0.8.0 encodes [][]byte as a matrix).
//   - A write that failed after it was sent is reported Uncertain and never
//     retried: it may have been applied.
//
// It imports device and value only; no other project package, and no other
// driver, imports it (docs/architecture.md, Layout and dependency direction).
package opcua
