#!/usr/bin/env bash
# make bench-flows (issue 13). Installs what the benchmark needs when it is
# missing (Debian python3-pymodbus, taskset, Node.js and npm; node-red 4.1.8
# and node-red-contrib-modbus 5.23.3 from npm into a cache outside the
# repo), runs TestBenchFlows (build tag bench) against bin/qubiqd and ends
# with its line `bench-flows: key=value ...` on stdout; everything else goes
# to stderr. See bench/README.md.
#
# Environment: BENCH_RUNS (default 3: the median of 3 runs is reported),
# BENCH_MSGS (default 20000: messages of the throughput burst), QUBIQ_BIN
# (default ./bin), QUBIQ_BENCH_CACHE (default $HOME/.cache/qubiq-bench),
# PYTHON_PATH (the workers' interpreter; default /usr/bin/python3 resolved).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${QUBIQ_BENCH_CACHE:-$HOME/.cache/qubiq-bench}"
nodered="$cache/nodered"
node_red_version=4.1.8
contrib_version=5.23.3

have() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
	if ! have apt-get; then
		echo "bench-flows: $* missing and no apt-get to install it" >&2
		exit 1
	fi
	echo "bench-flows: installing $*" >&2
	apt-get update -qq >&2 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

/usr/bin/python3 -c 'import pymodbus' 2>/dev/null || apt_install python3-pymodbus
have taskset || apt_install util-linux
{ have node && have npm; } || apt_install nodejs npm

installed() { node -p "require('$nodered/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed node-red)" != "$node_red_version" ] || [ "$(installed node-red-contrib-modbus)" != "$contrib_version" ]; then
	echo "bench-flows: installing node-red@$node_red_version node-red-contrib-modbus@$contrib_version in $nodered" >&2
	mkdir -p "$nodered"
	printf '{"name": "qubiq-bench-nodered", "private": true, "dependencies": {"node-red": "%s", "node-red-contrib-modbus": "%s"}}\n' \
		"$node_red_version" "$contrib_version" >"$nodered/package.json"
	# Install scripts build serialport's native bindings, which Modbus TCP does not use.
	(cd "$nodered" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error) >&2
fi

bin="${QUBIQ_BIN:-$PWD/bin}"
if [ ! -x "$bin/qubiqd" ]; then
	echo "bench-flows: $bin/qubiqd missing (make build)" >&2
	exit 1
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
QUBIQ_BIN="$bin" QUBIQ_BENCH_NODERED="$nodered" BENCH_RUNS="${BENCH_RUNS:-3}" \
	PYTHON_PATH="${PYTHON_PATH:-$(readlink -f /usr/bin/python3)}" \
	go test -tags bench -run '^TestBenchFlows$' -count=1 -v -timeout 60m ./bench/flows 2>&1 | tee "$log" >&2
detail="$(grep '^bench-flows-detail: ' "$log" | tail -n 1 || true)"
result="$(grep '^bench-flows: ' "$log" | tail -n 1)"
if [ -z "$result" ]; then
	echo "bench-flows: no result line" >&2
	exit 1
fi
{ grep -E '^bench-[a-z]+-detail: ' "$log" | tail -n 1 || true; echo "$result"; } | bench/record.sh
