#!/usr/bin/env bash
# Installs what QUBIQ Edge needs, only what is missing, for one of three sets:
#
#   scripts/ensure-deps.sh demo   what `make run` needs: python3 (the script
#                                 workers' interpreter), nodejs and npm (the
#                                 build of the console's bundle).
#   scripts/ensure-deps.sh build  what `make build` needs beyond Go: nodejs and
#                                 npm (the console's bundle: npm ci, esbuild).
#   scripts/ensure-deps.sh test   what `make test` and the benchmarks need
#                                 (the default): python3, python3-pymodbus,
#                                 python3-pip, socat, chromium, nodejs, npm,
#                                 postgresql, mosquitto and mosquitto-clients
#                                 (the MQTT broker the link's tests start on
#                                 free ports, and mosquitto_pub for the
#                                 benchmark), debootstrap (a Debian root the
#                                 .deb is installed into), and a running PostgreSQL cluster
#                                 with the test role and database qubiq_test
#                                 (password qubiq_test, on 127.0.0.1:5432).
#   scripts/ensure-deps.sh --list demo|build|test   print the Debian packages of a
#                                 set and exit.
#
# Debian packages come from apt-get; it needs root (or sudo) only when
# something is missing. Go modules are not handled here (`go mod download`).
set -euo pipefail

set_name=test
list_only=0
for a in "$@"; do
  case "$a" in
    demo|build|test) set_name=$a ;;
    --list) list_only=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "ensure-deps.sh: unknown argument '$a' (want demo, build, test or --list)" >&2; exit 2 ;;
  esac
done

# The packages of each set, with the check that tells whether one is there.
demo_pkgs=(python3 nodejs npm)
build_pkgs=(nodejs npm)
test_pkgs=(python3 python3-pymodbus python3-pip socat chromium nodejs npm postgresql mosquitto mosquitto-clients debootstrap)

have() {
  case "$1" in
    python3) [ -x /usr/bin/python3 ] ;;
    python3-pymodbus) /usr/bin/python3 -c 'import pymodbus' 2>/dev/null ;;   # Modbus peers of the tests
    python3-pip) /usr/bin/python3 -m pip --version >/dev/null 2>&1 ;;        # sandbox package installs
    socat) command -v socat >/dev/null 2>&1 ;;                               # Modbus RTU over a pty pair
    chromium) [ -x /usr/bin/chromium ] ;;                                    # LiveView end-to-end tests
    nodejs) command -v node >/dev/null 2>&1 ;;                               # node-opcua, playwright-core
    npm) command -v npm >/dev/null 2>&1 ;;
    postgresql) command -v pg_ctlcluster >/dev/null 2>&1 ;;                  # system.db on PostgreSQL
    mosquitto) [ -x /usr/sbin/mosquitto ] ;;                                 # the MQTT supervisor link's broker
    mosquitto-clients) command -v mosquitto_pub >/dev/null 2>&1 ;;           # bench-mqtt's C floor
    debootstrap) [ -x /usr/sbin/debootstrap ] ;;                             # the .deb installed into a Debian root
    *) return 1 ;;
  esac
}

case "$set_name" in
  demo) pkgs=("${demo_pkgs[@]}") ;;
  build) pkgs=("${build_pkgs[@]}") ;;
  *) pkgs=("${test_pkgs[@]}") ;;
esac
if [ "$list_only" = 1 ]; then
  echo "${pkgs[*]}"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

need=()
for p in "${pkgs[@]}"; do
  have "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages ($set_name set): ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

[ "$set_name" = test ] || exit 0

# PostgreSQL for the system.db tests: start the newest cluster when nothing
# answers on 5432, then make the test role and database (password auth, so
# no pg_hba change).
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
