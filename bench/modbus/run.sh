#!/usr/bin/env bash
# make bench-modbus (bench/README.md, Benchmarks; issue 5). Installs what the
# benchmark needs when it is missing (Debian python3-pymodbus, Node.js and
# npm; node-red 4.1.8 and node-red-contrib-modbus 5.23.3 from npm into a
# cache outside the repo), runs TestBenchModbus (build tag bench) and ends
# with its line `bench-modbus: key=value ...` on stdout; everything else
# goes to stderr. See bench/README.md.
#
# Environment: BENCH_RUNS (default 3: the median of 3 runs is reported),
# BENCH_SCANS (default 30 scans of 1 s), QUBIQ_BENCH_CACHE (default
# $HOME/.cache/qubiq-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${QUBIQ_BENCH_CACHE:-$HOME/.cache/qubiq-bench}"
nodered="$cache/nodered"
node_red_version=4.1.8
contrib_version=5.23.3

have() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
	if ! have apt-get; then
		echo "bench-modbus: $* missing and no apt-get to install it" >&2
		exit 1
	fi
	echo "bench-modbus: installing $*" >&2
	apt-get update -qq >&2 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

/usr/bin/python3 -c 'import pymodbus' 2>/dev/null || apt_install python3-pymodbus
have taskset || apt_install util-linux
{ have node && have npm; } || apt_install nodejs npm

installed() { node -p "require('$nodered/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed node-red)" != "$node_red_version" ] || [ "$(installed node-red-contrib-modbus)" != "$contrib_version" ]; then
	echo "bench-modbus: installing node-red@$node_red_version node-red-contrib-modbus@$contrib_version in $nodered" >&2
	mkdir -p "$nodered"
	printf '{"name": "qubiq-bench-nodered", "private": true, "dependencies": {"node-red": "%s", "node-red-contrib-modbus": "%s"}}\n' \
		"$node_red_version" "$contrib_version" >"$nodered/package.json"
	# Install scripts build serialport's native bindings, which Modbus TCP does not use.
	(cd "$nodered" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error) >&2
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
QUBIQ_BENCH_NODERED="$nodered" BENCH_RUNS="${BENCH_RUNS:-3}" \
	go test -tags bench -run '^TestBenchModbus$' -count=1 -v -timeout 60m ./bench/modbus 2>&1 | tee "$log" >&2
result="$(grep '^bench-modbus: ' "$log" | tail -n 1)"
if [ -z "$result" ]; then
	echo "bench-modbus: no result line" >&2
	exit 1
fi
{ grep -E '^bench-[a-z]+-detail: ' "$log" | tail -n 1 || true; echo "$result"; } | bench/record.sh
