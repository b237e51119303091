"""Save-time check of a QUBIQ Edge script module.

Run as `python -I -S qubiq_check.py <code-dir>` with a JSON request on stdin:
{"module": "...", "source": "...", "allowed": [...], "installed": [...]}
(installed: the top-level import names of the installed packages).
It compiles the source (never runs it) and prints one JSON object on stdout:
{"entries": [{"name", "timeout_ms" (null when absent), "line", "gateway_at"
 (where its @gateway is, absent without one)}],
 "diagnostics": [{"line", "column", "end_line", "end_column", "code",
 "message", "severity"}],
 "decorators": [{"name", "line", "column", "end_line", "end_column"}] (the
 decorator names nothing binds: the caller tells typos of known ones)}.
Standard library only.
"""

import json
import sys

sys.path.insert(0, sys.argv[1])

import qubiq_guard as guard  # noqa: E402


def main():
    req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    source = req["source"]
    allowed = set(req["allowed"])
    installed = set(req.get("installed") or [])
    filename = "<script %s>" % req["module"]
    tree, diags = guard.parse(source, filename)
    entries, decorators = [], []
    if tree is not None:
        diags += guard.check_tree(tree, source, allowed, installed, check_imports=True)
        entries = guard.entries(tree, source, diags)
        decorators = guard.unbound_decorators(tree, source)
    diags.sort(key=lambda d: (d["line"], d["column"]))
    sys.stdout.write(json.dumps({"entries": entries, "diagnostics": diags, "decorators": decorators}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
