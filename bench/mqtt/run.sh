#!/usr/bin/env bash
# make bench-mqtt (issue 12, Benchmark): runs TestBenchMQTT (build tag
# bench) against bin/qubiqd and ends with its line `bench-mqtt: key=value
# ...` on stdout (its detail line before it), recorded in
# build/bench/results.json; everything else goes to stderr. See bench/README.md.
#
# Environment: BENCH_RUNS (default 3: the median of each figure over 3
# runs), BENCH_WINDOW (default 10s: the measured window of each
# run), BENCH_PIN (default 0: qubiqd runs pinned to that core with taskset;
# empty: not pinned), QUBIQ_BIN (default bin/).
set -euo pipefail
cd "$(dirname "$0")/../.."
export QUBIQ_BIN="${QUBIQ_BIN:-$PWD/bin}"
if [ ! -x "$QUBIQ_BIN/qubiqd" ] || ! command -v mosquitto_pub >/dev/null || [ ! -x /usr/sbin/mosquitto ]; then
	echo "bench-mqtt: needs $QUBIQ_BIN/qubiqd (make build), /usr/sbin/mosquitto and mosquitto_pub (scripts/ensure-deps.sh)" >&2
	exit 1
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
go test -tags bench -run '^TestBenchMQTT$' -count=1 -v -timeout 60m ./bench/mqtt 2>&1 | tee "$log" >&2
# The last of each line (a line per run could precede the summary),
# recorded in build/bench/results.json like every benchmark's.
{ grep '^bench-mqtt-detail: ' "$log" | tail -n 1 || true; grep '^bench-mqtt: ' "$log" | tail -n 1 || true; } | bench/record.sh
