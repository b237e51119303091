// Package all registers every device driver of QUBIQ Edge by importing it
// for its init side effect (docs/architecture.md: one place). Only cmd/qubiqd and
// tests import it; library packages take a driver through device.Lookup.
package all

import (
	_ "qubiq.dev/edge/device/modbus" // registers "modbus"
	_ "qubiq.dev/edge/device/opcua"  // registers "opcua"
	_ "qubiq.dev/edge/device/sim"    // registers "sim"
)
