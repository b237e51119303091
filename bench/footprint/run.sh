#!/usr/bin/env bash
# make bench-footprint (issue 18): runs TestBenchFootprint (build tag
# bench) against bin/qubiqd and ends with its line `bench-footprint:
# key=value ...` on stdout; everything else goes to stderr. See
# bench/README.md.
#
# Environment: BENCH_WINDOW (default 20s), BENCH_WARMUP (8s), BENCH_SIZES
# (1000,10000,50000), BENCH_SOURCES (modbus,sim), BENCH_PROFILE=NAME
# (CPU and heap profiles into build/bench/profiles; needs a qubiqd built
# with -tags benchprofile, which make profile-footprint does),
# QUBIQ_BIN (directory of qubiqd; default bin/).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v taskset >/dev/null 2>&1 || { echo "bench-footprint: taskset (util-linux) missing" >&2; exit 1; }
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
go test -tags bench -run '^TestBenchFootprint$' -count=1 -v -timeout 30m ./bench/footprint 2>&1 | tee "$log" >&2
grep -E '^bench-footprint(-detail)?: ' "$log" | bench/record.sh
