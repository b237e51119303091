#!/usr/bin/env bash
# make bench-sandbox (bench/README.md, Benchmarks; issue 3). Needs Debian's
# python3 (installed when missing), runs TestBenchSandbox (build tag bench)
# and ends with its line `bench-sandbox: key=value ...` on stdout;
# everything else goes to stderr. See bench/README.md.
#
# Environment: BENCH_RUNS (default 3: the median of 3 runs is reported),
# PYTHON_PATH (default: /usr/bin/python3 resolved), BENCH_PIN (default 0:
# the benchmark and its workers run pinned to that core with taskset, as the
# harness rules pin the system under test; empty: not pinned, and the
# scheduler's cross-core wake-ups, 20-50 µs each on this kind of VM, move
# the figures from run to run).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ ! -x /usr/bin/python3 ]; then
	echo "bench-sandbox: installing python3" >&2
	apt-get update -qq >&2 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >&2
fi

pin=()
if [ -n "${BENCH_PIN-0}" ] && command -v taskset >/dev/null 2>&1; then
	pin=(taskset -c "${BENCH_PIN-0}")
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
go test -tags bench -c -o "$log.test" ./bench/sandbox >&2
trap 'rm -f "$log" "$log.test"' EXIT
PYTHON_PATH="${PYTHON_PATH:-$(readlink -f /usr/bin/python3)}" BENCH_RUNS="${BENCH_RUNS:-3}" \
	"${pin[@]}" "$log.test" -test.run '^TestBenchSandbox$' -test.count=1 -test.v -test.timeout 20m \
	${BENCH_CPUPROFILE:+-test.cpuprofile "$BENCH_CPUPROFILE"} 2>&1 | tee "$log" >&2
# Where a one-tag read's time goes beyond the floor: the worker's steps
# (pycost.py) and the daemon's (BenchmarkDispatch_TagRead1), each alone,
# on the same core (bench/README.md, "The script call floor").
py="$("${pin[@]}" "${PYTHON_PATH:-$(readlink -f /usr/bin/python3)}" -I -S bench/sandbox/pycost.py sandbox/python)"
godisp="$("${pin[@]}" go test -run '^$' -bench '^BenchmarkDispatch_TagRead1$' -cpu 1 -benchtime 1s ./sandbox 2>/dev/null |
	awk '/^BenchmarkDispatch_TagRead1/ {printf "go_dispatch_us=%.2f", $3 / 1000}')"
echo "$py $godisp" | tee -a "$log" >&2
result="$(grep '^bench-sandbox: ' "$log" | tail -n 1)"
if [ -z "$result" ]; then
	echo "bench-sandbox: no result line" >&2
	exit 1
fi
{ grep -E '^bench-[a-z]+-detail: ' "$log" | tail -n 1 || true; echo "$result"; } | bench/record.sh
