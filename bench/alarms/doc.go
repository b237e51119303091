// Package alarmbench is `make bench-alarms` (issue 16, Benchmark): a real
// qubiqd with 10,000 simulator tags scanned at 1 s (every tag changes at
// every scan), run twice over the same window: without alarms, then with
// 10,000 alarm definitions, one per tag (a tenth of them crossing their
// setpoint twice per sine period, the others evaluated at every change
// without crossing). It reports the CPU and peak RSS the alarms add, and
// the latency from a transition's source sample (the alarm's "timestamp")
// to its "alarm" message on a WebSocket client. The benchmark is
// TestBenchAlarms (build tag bench), started by run.sh; its last line is
// `bench-alarms: defs=… added_cpu_pct=… added_rss_mib=… latency_p50_ms=…
// latency_p99_ms=…` (bench/README.md). Nothing imports this package.
package alarmbench
