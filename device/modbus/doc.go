// Package modbus is the Modbus driver of QUBIQ Edge, registered as "modbus"
// (device.Register from init; device/all imports it): Modbus TCP
// (tcp://host:port), Modbus RTU on a serial port (rtu:///dev/ttyUSB0) and
// RTU frames over a TCP socket (rtu+tcp://host:port, serial-to-Ethernet
// gateways).
//
// It owns the driver config (Config, decoded strictly from the project
// file's device entry), the tag address notations (ParseAddress: HR100,
// 40101, 400101, HR100.3, HR100:10), the register codec for every tag type
// and byte order (ByteOrder), read planning (points merged into requests
// within max_gap and max_registers_per_request, halved again when the
// device refuses a merged read with exception 2 or 3, and shown without
// sending by Plan, the device.Planner), the transports (one request in
// flight per connection or serial bus, several devices on one serial port
// sharing its bus, min_interval, reconnect with backoff), the per-unit
// circuit breaker, and the mapping of Modbus exceptions and I/O failures
// onto quality (docs/project.md, Quality).
//
// It uses github.com/goburrow/modbus v0.1.0 for PDU encoding and parsing,
// github.com/goburrow/serial v0.1.0 for the serial port, and its own
// framing and transport for the wire, because of faults of those versions
// that it works around (see link): a late answer desynchronises Modbus TCP
// transaction ids for good (docs/modbus.md, fault C08), exception function codes
// keep the 0x80 bit (C07), the RTU transport ANDs the function code with
// 0x80 instead of ORing and so never recognises an exception frame split
// across reads (C09, readRTUFrame), and responses are not checked against
// the quantity asked. Every response is verified before goburrow parses it
// (checkResponse, readRTUFrame; both fuzzed).
//
// # Caveats
//
//   - Writing a bit of a register (HR100.3) is a read-modify-write of the
//     whole register and is not atomic on the device.
//   - A write that failed after its request was sent is reported Uncertain
//     and never retried: it may have been applied.
//   - RTU has no transaction id: an answer that arrives after its request
//     timed out is flushed before the next request, but one that arrives
//     after the next request went out can only be caught by the frame
//     checks (address, function, byte count, CRC).
//
// It imports device and value only; no other project package, and no other
// driver, imports it (docs/architecture.md, Layout and dependency direction).
package modbus
