#!/usr/bin/env bash
# make bench-api (bench/README.md, Benchmarks; issue 4). Needs Debian python3
# (the sqlite3 peer and the workers); runs TestBenchAPI (build tag bench)
# and ends with its line `bench-api: key=value ...` on stdout; everything
# else goes to stderr. BENCH_SCALE (0 < s <= 1) shrinks the workload for a
# smoke run.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v /usr/bin/python3 >/dev/null 2>&1; then
	echo "bench-api: installing python3" >&2
	apt-get update -qq >&2 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >&2
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
go test -tags bench -run '^TestBenchAPI$' -count=1 -v -timeout 60m ./bench/api 2>&1 | tee "$log" >&2
result="$(grep '^bench-api: ' "$log" | tail -n 1)"
if [ -z "$result" ]; then
	echo "bench-api: no result line" >&2
	exit 1
fi
{ grep -E '^bench-[a-z]+-detail: ' "$log" | tail -n 1 || true; echo "$result"; } | bench/record.sh
