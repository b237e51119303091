// Package flowsbench is `make bench-flows` (issue 13; bench/README.md):
// the same flow built in qubiqd and in Node-RED 4.1.8, run one after the
// other against the same pymodbus server (stamp_server.py, which stamps
// every holding register write as it arrives):
//
//   - throughput: messages per second through one trivial Python node
//     (qubiqd: a tag trigger, a Python node doing x*0.1+3, an end; fed by
//     a burst of tag changes, measured while the queue drains) and through
//     one function node doing the same arithmetic (Node-RED: a function
//     node sending the burst, the function, a counting node), each per
//     core used (CPU seconds of the process and its children over the
//     window);
//   - latency: trigger to device write, p50 and p99 over 200 triggers 20 ms
//     apart: an HTTP POST (qubiqd: POST /api/v1/tags/write of a simulator
//     tag; Node-RED: an http in node) until the scaled value's write
//     arrives at pymodbus (qubiqd: the flow's tag_write on a Modbus tag;
//     Node-RED: node-red-contrib-modbus 5.23.3's modbus-write).
//
// The benchmark is TestBenchFlows (build tag bench), started by run.sh.
// Nothing imports this package.
package flowsbench
