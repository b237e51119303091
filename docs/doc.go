// Package docs holds QUBIQ Edge's reference pages (the *.md files beside
// this one; README.md is their index) and, in its tests, the check that
// keeps every example in them runnable: each fenced YAML, CSV, Python and
// shell example of these pages and of the repository's README is
// extracted and checked against the built binaries — daemon configs and
// project files with `qubiqd --check-config`, tag CSV files with the tag
// importer, Python modules with the daemon's save-time check, and qubiqctl
// command lines with `qubiqctl ... --help`. The fence conventions (bad,
// fragment, want="...", file=...) are described in README.md.
//
// It has no code besides this comment; its tests need qubiqd and qubiqctl
// (QUBIQ_BIN, else a fresh build) and python3 (PYTHON_PATH, else
// /usr/bin/python3).
package docs
