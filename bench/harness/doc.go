// Package harness is what the whole-process benchmarks share: it starts
// the real bin/qubiqd over a generated config and project in a temporary
// directory (Daemon), times its start to READY=1 on a NOTIFY_SOCKET of its
// own (sd_notify(3)), samples CPU seconds and resident memory of the whole
// process tree from /proc (Tree, Sampler), starts the fast Modbus TCP
// server of bench/cmd/fastmodbus in a process of its own so its CPU is
// reported apart (FastModbus), runs Node-RED as a peer (NodeRED), and
// formats and records result lines (Line). bench/README.md says how the
// figures are read. Only benchmarks import it.
package harness
