// Package enginebench is `make bench-engine` (issue 18, B3): the tag
// engine's ceiling, BenchmarkEngineCeiling of package tagengine run on one
// core (-cpu 1, pinned to core 0), next to the same stream through Node-RED
// 4.1.8 in the same run: a function node sending the updates, an RBE
// (filter) node per topic, and a function node consuming them, on core 0
// too. The benchmark is TestBenchEngine (build tag bench), started by
// run.sh; bench/README.md says how to read its line. Nothing imports this
// package.
package enginebench
