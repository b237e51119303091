#!/usr/bin/env bash
# make bench-alarms (issue 16, Benchmark): runs TestBenchAlarms (build tag
# bench) against bin/qubiqd and ends with its line `bench-alarms: key=value
# ...` on stdout; everything else goes to stderr. See bench/README.md.
#
# Environment: BENCH_RUNS (default 3: the median of each figure over 3
# pairs of runs), BENCH_WINDOW (default 30s: the measured window of each
# run), BENCH_PIN (default 0: qubiqd runs pinned to that core with taskset;
# empty: not pinned), QUBIQ_BIN (default bin/).
set -euo pipefail
cd "$(dirname "$0")/../.."
export QUBIQ_BIN="${QUBIQ_BIN:-$PWD/bin}"
if [ ! -x "$QUBIQ_BIN/qubiqd" ]; then
	echo "bench-alarms: no $QUBIQ_BIN/qubiqd (make build)" >&2
	exit 1
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
go test -tags bench -run '^TestBenchAlarms$' -count=1 -v -timeout 60m ./bench/alarms 2>&1 | tee "$log" >&2
result="$(grep '^bench-alarms: ' "$log" | tail -n 1)"
if [ -z "$result" ]; then
	echo "bench-alarms: no result line" >&2
	exit 1
fi
{ grep -E '^bench-[a-z]+-detail: ' "$log" | tail -n 1 || true; echo "$result"; } | bench/record.sh
