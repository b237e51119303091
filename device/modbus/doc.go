// Package modbus is the Modbus TCP driver of QUBIQ Edge, registered as
// "modbus" (device.Register from init; device/all imports it).
//
// It owns the driver config (Config, decoded strictly from the project
// file's device entry), the tag address notations (ParseAddress: HR100,
// 40101, 400101, HR100.3, HR100:10), the register codec for every tag type
// and byte order (ByteOrder), read planning (points merged into requests
// within max_gap and max_registers_per_request, split again when the device
// refuses a bridged gap), the connection (one request in flight, min_interval,
// reconnect with backoff), the per-unit circuit breaker, and the mapping of
// Modbus exceptions and I/O failures onto quality (DESIGN.md, Quality).
//
// It uses github.com/goburrow/modbus v0.1.0 for PDU encoding and parsing, and
// its own transport for the socket, because of faults of that version that
// it works around (see link): a late answer desynchronises transaction ids
// for good (cases/modbus.md C08), exception function codes keep the 0x80 bit
// (C07), and responses are not checked against the quantity asked. Every
// response is verified before goburrow parses it (checkResponse, fuzzed).
//
// # Caveats
//
//   - Writing a bit of a register (HR100.3) is a read-modify-write of the
//     whole register and is not atomic on the device.
//   - A write that failed after its request was sent is reported Uncertain
//     and never retried: it may have been applied.
//
// It imports device and value only; no other project package, and no other
// driver, imports it (DESIGN.md, Layout and dependency direction).
package modbus
