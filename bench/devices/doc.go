// Package devicesbench is `make bench-devices` (issue 18, B2): 100 Modbus
// TCP devices of 1,000 float32 points each (2,000 holding registers, 16
// requests of at most 125 registers), polled every 1 s: 100,000 points per
// second from the fast server (bench/cmd/fastmodbus, 100 ports, core 1,
// its CPU reported apart). The real bin/qubiqd (two Python workers up) and
// Node-RED 4.1.8 with node-red-contrib-modbus 5.23.3 at its best
// configuration (one modbus-read node per 125-register block, 1 ms command
// delay) run one after the other on core 0 against the same server. The
// benchmark is TestBenchDevices (build tag bench), started by run.sh;
// bench/README.md says how to read its line. Nothing imports this package.
package devicesbench
