#!/usr/bin/env bash
# Installs and starts what QUBIQ Edge's demo and tests need, only what is
# missing: Debian packages (apt-get), a running PostgreSQL with a test role
# and database. Needs root (or sudo) when something must be installed.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

need=()
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -c 'import pymodbus' 2>/dev/null || need+=(python3-pymodbus)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)     # sandbox package installs
command -v socat >/dev/null 2>&1 || need+=(socat)                           # Modbus RTU over a pty pair
[ -x /usr/bin/chromium ] || need+=(chromium)                                # LiveView end-to-end test
command -v node >/dev/null 2>&1 || need+=(nodejs)                           # node-opcua, playwright-core
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)              # system.db on PostgreSQL

if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

# PostgreSQL: start the newest cluster when nothing answers on 5432, then
# make the test role and database (password auth, so no pg_hba change).
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  if [ -z "$ver" ]; then
    ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
    $SUDO pg_createcluster "$ver" main
  fi
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main start
  for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
fi
psql_admin() { $SUDO su postgres -s /bin/sh -c "psql -v ON_ERROR_STOP=1 -qtAc \"$1\""; }
if [ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname='qubiq_test'")" != "1" ]; then
  psql_admin "CREATE ROLE qubiq_test LOGIN PASSWORD 'qubiq_test'"
fi
if [ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname='qubiq_test'")" != "1" ]; then
  psql_admin "CREATE DATABASE qubiq_test OWNER qubiq_test"
fi
