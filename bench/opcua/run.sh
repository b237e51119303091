#!/usr/bin/env bash
# make bench-opcua (bench/README.md, Benchmarks; issue 6). Installs what the
# benchmark needs when it is missing (Node.js and npm, taskset; node-red
# 4.1.8, node-red-contrib-opcua 0.2.348 and node-opcua 2.160.0, pinned for
# the contrib package through npm overrides, from npm into a cache outside
# the repo), runs TestBenchOPCUA (build tag bench) against bin/qubiqd (make
# build) and ends with its line `bench-opcua: key=value ...` on stdout;
# everything else goes to stderr. See bench/opcua/README.md.
#
# Environment: BENCH_ITEMS (5000), BENCH_SECONDS (60), BENCH_INTERVAL_MS
# (skips the calibration), QUBIQ_BIN (default ./bin), QUBIQ_BENCH_CACHE
# (default $HOME/.cache/qubiq-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."

cache="${QUBIQ_BENCH_CACHE:-$HOME/.cache/qubiq-bench}"
install="$cache/nodered-opcua"
node_red_version=4.1.8
contrib_version=0.2.348
node_opcua_version=2.160.0

have() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
	if ! have apt-get; then
		echo "bench-opcua: $* missing and no apt-get to install it" >&2
		exit 1
	fi
	echo "bench-opcua: installing $*" >&2
	apt-get update -qq >&2 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

have taskset || apt_install util-linux
{ have node && have npm; } || apt_install nodejs npm

installed() { node -p "require('$install/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed node-red)" != "$node_red_version" ] || [ "$(installed node-red-contrib-opcua)" != "$contrib_version" ] ||
	[ "$(installed node-opcua)" != "$node_opcua_version" ]; then
	echo "bench-opcua: installing node-red@$node_red_version node-red-contrib-opcua@$contrib_version node-opcua@$node_opcua_version in $install" >&2
	mkdir -p "$install"
	cat >"$install/package.json" <<JSON
{"name": "qubiq-bench-nodered-opcua", "private": true,
 "dependencies": {"node-red": "$node_red_version", "node-red-contrib-opcua": "$contrib_version", "node-opcua": "$node_opcua_version"},
 "overrides": {"node-opcua": "$node_opcua_version", "node-opcua-file-transfer": "$node_opcua_version"}}
JSON
	# Install scripts build native bindings (serialport) that OPC UA over TCP does not use.
	(cd "$install" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error) >&2
fi

bin="${QUBIQ_BIN:-$PWD/bin}"
if [ ! -x "$bin/qubiqd" ]; then
	echo "bench-opcua: $bin/qubiqd missing (make build)" >&2
	exit 1
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
QUBIQ_BENCH_NODERED="$install" QUBIQ_BIN="$bin" \
	go test -tags bench -run '^TestBenchOPCUA$' -count=1 -v -timeout 20m ./bench/opcua 2>&1 | tee "$log" >&2
result="$(grep '^bench-opcua: ' "$log" | tail -n 1)"
if [ -z "$result" ]; then
	echo "bench-opcua: no result line" >&2
	exit 1
fi
{ grep -E '^bench-[a-z]+-detail: ' "$log" | tail -n 1 || true; echo "$result"; } | bench/record.sh
