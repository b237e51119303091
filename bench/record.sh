#!/usr/bin/env bash
# Reads a benchmark's result lines (`bench-NAME: key=value ...`, and
# `bench-NAME-detail: ...`) on stdin, prints them on stdout (the result
# line last) and merges them into build/bench/results.json (BENCH_RESULTS
# overrides the path): one entry per line name, holding the line, its
# figures (numbers where they parse) and the UTC time it was recorded.
# Exits 1 when no result line came.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${BENCH_RESULTS:-$root/build/bench/results.json}"
mkdir -p "$(dirname "$out")"
/usr/bin/python3 -c '
import json, os, sys, datetime, tempfile
out = sys.argv[1]
lines = [l.rstrip("\n") for l in sys.stdin if l.startswith("bench-") and ": " in l]
main = [l for l in lines if not l.split(": ", 1)[0].endswith("-detail")]
if not main:
    sys.stderr.write("record.sh: no result line\n")
    sys.exit(1)
try:
    with open(out) as f:
        results = json.load(f)
except (OSError, ValueError):
    results = {}
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
def num(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v
for l in lines:
    name, rest = l.split(": ", 1)
    figs = {}
    for kv in rest.split():
        k, _, v = kv.partition("=")
        figs[k] = num(v)
    results[name] = {"line": l, "figures": figs, "recorded": now}
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out))
with os.fdopen(fd, "w") as f:
    json.dump(results, f, indent=1, sort_keys=True)
    f.write("\n")
os.replace(tmp, out)
for l in [l for l in lines if l not in main] + main:
    print(l)
' "$out"
