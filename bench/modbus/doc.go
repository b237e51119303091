// Package modbusbench is `make bench-modbus` (bench/README.md, Benchmarks; issue
// 5): 2,000 tags of mixed types with gaps over 10,000 holding registers of
// one pymodbus server, scanned at 1 s for 30 s by the modbus driver
// (cmd/scanner, a process of its own), then by Node-RED 4.1.8 with
// node-red-contrib-modbus 5.23.3 against the same server, one after the
// other, beside the floor of a bare goburrow loop sending the minimal
// requests back to back. Requests are counted on the wire by a proxy in
// front of the server; the minimum per scan comes from a dynamic program
// of its own, not from the planner. The benchmark itself is TestBenchModbus
// (build tag bench), started by run.sh; bench/README.md says how to read
// its last line. Nothing imports this package.
package modbusbench
