#!/usr/bin/env bash
# Installs node-red 4.1.8 and node-red-contrib-modbus 5.23.3 (npm) into
# $QUBIQ_BENCH_CACHE/nodered (default $HOME/.cache/qubiq-bench) when they
# are missing, Node.js, npm and taskset with apt-get when those are, and
# prints the install directory: the same install bench/modbus/run.sh
# makes, shared by the whole-process benchmarks.
set -euo pipefail
cache="${QUBIQ_BENCH_CACHE:-$HOME/.cache/qubiq-bench}"
nodered="$cache/nodered"
node_red_version=4.1.8
contrib_version=5.23.3
have() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
	if ! have apt-get; then
		echo "bench: $* missing and no apt-get to install it" >&2
		exit 1
	fi
	echo "bench: installing $*" >&2
	apt-get update -qq >&2 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}
have taskset || apt_install util-linux
{ have node && have npm; } || apt_install nodejs npm
installed() { node -p "require('$nodered/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed node-red)" != "$node_red_version" ] || [ "$(installed node-red-contrib-modbus)" != "$contrib_version" ]; then
	echo "bench: installing node-red@$node_red_version node-red-contrib-modbus@$contrib_version in $nodered" >&2
	mkdir -p "$nodered"
	printf '{"name": "qubiq-bench-nodered", "private": true, "dependencies": {"node-red": "%s", "node-red-contrib-modbus": "%s"}}\n' \
		"$node_red_version" "$contrib_version" >"$nodered/package.json"
	# Install scripts build serialport's native bindings, which Modbus TCP does not use.
	(cd "$nodered" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error) >&2
fi
echo "$nodered"
