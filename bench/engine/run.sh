#!/usr/bin/env bash
# make bench-engine (issue 18, B3): runs TestBenchEngine (build tag bench),
# which runs BenchmarkEngineCeiling on one core and the same stream through
# Node-RED (installed by bench/nodered.sh when missing), and ends with its
# line `bench-engine: key=value ...` on stdout; everything else goes to
# stderr. See bench/README.md.
#
# Environment: BENCH_BENCHTIME (go test -benchtime, default 3s). make
# profile-engine takes a CPU profile of the Go benchmark.
set -euo pipefail
cd "$(dirname "$0")/../.."
nodered="$(bench/nodered.sh)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
QUBIQ_BENCH_NODERED="$nodered" \
	go test -tags bench -run '^TestBenchEngine$' -count=1 -v -timeout 20m ./bench/engine 2>&1 | tee "$log" >&2
grep -E '^bench-engine(-detail)?: ' "$log" | bench/record.sh
