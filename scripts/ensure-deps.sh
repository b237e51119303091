#!/usr/bin/env bash
# Installs the Debian packages QUBIQ Edge's demo and tests need, only those
# that are missing. Needs root (or sudo) when something must be installed.
set -euo pipefail

need=()
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -c 'import pymodbus' 2>/dev/null || need+=(python3-pymodbus)
command -v socat >/dev/null 2>&1 || need+=(socat)
[ -x /usr/bin/chromium ] || need+=(chromium)          # LiveView end-to-end test (PEERS.md)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
