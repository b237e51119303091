// Package mqttbench is `make bench-mqtt` (issue 12, Benchmark): a real
// qubiqd publishing simulator tags to a Mosquitto of its own (free
// loopback port), measured by a subscriber on the same broker (a minimal
// MQTT client of the benchmark's own): tag values
// per second at QoS 0 and QoS 1 one message per tag, and at QoS 1
// batched (one message per scan); beside them mosquitto_pub (the C floor)
// publishing the same payloads to the same broker in the same run; then
// the outbox's drain rate after an outage of 100,000 queued messages,
// and the CPU seconds of qubiqd and of the broker over the measured
// windows. The benchmark is TestBenchMQTT (build tag bench), started by
// run.sh; its last line is `bench-mqtt: qos0_per_s=… qos1_per_s=…
// qos1_batched_per_s=… mosquitto_pub_ratio=… drain_per_s=… cpu_s=…
// broker_cpu_s=…` (bench/README.md). Nothing imports this package.
package mqttbench
