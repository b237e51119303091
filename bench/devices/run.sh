#!/usr/bin/env bash
# make bench-devices (issue 18, B2): installs node-red 4.1.8 and
# node-red-contrib-modbus 5.23.3 when missing (as bench/modbus/run.sh
# does, into the same cache), runs TestBenchDevices (build tag bench) and
# ends with its line `bench-devices: key=value ...` on stdout; everything
# else goes to stderr. See bench/README.md.
#
# Environment: BENCH_DEVICES (default 100), BENCH_WINDOW_S (30),
# BENCH_PEER=off (qubiqd only: to compare two builds quickly; its ratios
# are then meaningless),
# QUBIQ_BENCH_CACHE (default $HOME/.cache/qubiq-bench), QUBIQ_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
nodered=""
[ "${BENCH_PEER:-}" = off ] || nodered="$(bench/nodered.sh)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
QUBIQ_BENCH_NODERED="$nodered" \
	go test -tags bench -run '^TestBenchDevices$' -count=1 -v -timeout 30m ./bench/devices 2>&1 | tee "$log" >&2
grep -E '^bench-devices(-detail)?: ' "$log" | bench/record.sh
