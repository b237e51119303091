// Package apibench is `make bench-api` (bench/README.md, Benchmarks; issue 4):
// system.vars.incr from two Python workers of a real qubiqd (and from two
// goroutines on the store alone), getTrends over one day of 1 Hz history
// for 10 tags (raw and 1-minute time-weighted averages), and history
// ingest (10,000 tags at 1 Hz, a 100,000 samples/s burst, then as fast as
// it goes) next to the same samples written by Python's sqlite3 in WAL mode
// with executemany in 1,000-row transactions. The benchmark is TestBenchAPI
// (build tag bench), started by run.sh; its last line is
// `bench-api: incr_lost=… incr_ops_per_s=… trends_raw_ms=… trends_avg_ms=…
// ingest_samples_per_s=… fsyncs_per_s=… sqlite_ratio=… (details)`.
// fsyncs_per_s counts two per bbolt commit (data, then meta) during the
// 1 Hz load. Nothing imports this package.
package apibench
