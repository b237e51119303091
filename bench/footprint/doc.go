// Package footprintbench is `make bench-footprint` (issue 18): the real
// bin/qubiqd with 1,000, 10,000 and 50,000 tags scanned every 1 s, from
// Modbus devices of the fast server (bench/cmd/fastmodbus, in a process of
// its own on core 1, its CPU reported apart) and from the simulator, with
// every tenth tag's history on, and two Python workers up. For each it
// reports the daemon's steady and peak resident memory, its CPU, the store
// file's growth per hour and the time from exec to READY=1. The benchmark
// is TestBenchFootprint (build tag bench), started by run.sh;
// bench/README.md says how to read its line. Nothing imports this package.
package footprintbench
