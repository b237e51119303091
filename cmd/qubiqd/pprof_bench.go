//go:build benchprofile

package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// Built only with the build tag benchprofile (make profile-NAME builds
// such a binary for the whole-process benchmarks): QUBIQ_BENCH_PPROF=
// 127.0.0.1:PORT serves net/http/pprof there, on loopback only, so a
// benchmark can take CPU and heap profiles of the running daemon. A
// release build has none of this; the diagnostics listener's own pprof
// (config `diagnostics`) is the way on an appliance.
func init() {
	addr := os.Getenv("QUBIQ_BENCH_PPROF")
	os.Unsetenv("QUBIQ_BENCH_PPROF") // not for the workers and helpers qubiqd starts
	if addr == "" || (len(os.Args) > 1 && os.Args[1] == "sandbox-exec") {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		os.Stderr.WriteString("qubiqd: QUBIQ_BENCH_PPROF must be a loopback host:port\n")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Stderr.WriteString("qubiqd: QUBIQ_BENCH_PPROF: " + err.Error() + "\n")
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }() // lives as long as the process
}
