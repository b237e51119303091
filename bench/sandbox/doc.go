// Package sandboxbench is `make bench-sandbox` (bench/README.md, Benchmarks;
// issue 3; bench/README.md, B4 and B6): the Python worker pool of package
// sandbox, measured in one process against a tag map served through the
// sandbox.TagReader fast path, as the daemon serves it:
//
//   - system.tag.read of 1 tag 20,000 times and of 100 tags 5,000 times
//     from a script, p50/p99 of the round trip seen from the script (the
//     interval between consecutive calls arriving in Go);
//   - the floor, measured the same way in the same run over the same
//     transport: a Python program sending empty frames over the same two
//     pipes to a Go echo;
//   - trivial gateway script runs per second with 2 workers;
//   - pool cold start (2 workers ready) and respawn after kill -9.
//
// The benchmark is TestBenchSandbox (build tag bench), started by run.sh;
// bench/README.md says how to read its last line. Nothing imports this
// package.
package sandboxbench
