// Package opcuabench is `make bench-opcua` (bench/README.md, Benchmarks; issue 6;
// bench/README.md, B7): 5,000 monitored items on one node-opcua 2.160.0
// server (server.js here) changing together at a fixed rate for 60 s,
// subscribed first by bin/qubiqd itself (a generated project, the tag
// engine's changes counted by the daemon's debug change probe,
// QUBIQ_DEBUG_CHANGES_FILE), then by Node-RED 4.1.8 with
// node-red-contrib-opcua 0.2.348 against the same server instance. Each
// client's delivered changes are counted against the notifications the
// server reports it sent (a counter in server.js). The change rate starts
// at every 100 ms and is lowered until node-opcua itself keeps up. The
// benchmark is TestBenchOPCUA (build tag bench), started by run.sh;
// README.md beside it says how to read its last line. Nothing imports this
// package.
package opcuabench
