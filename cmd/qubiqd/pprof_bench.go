//go:build benchprofile

package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	rpprof "runtime/pprof"
	"time"
)

// Built only with the build tag benchprofile (make profile-NAME builds
// such a binary for the whole-process benchmarks): QUBIQ_BENCH_PPROF=
// 127.0.0.1:PORT serves net/http/pprof there, on loopback only, so a
// benchmark can take CPU and heap profiles of the running daemon. A
// release build has none of this; the diagnostics listener's own pprof
// (config `diagnostics`) is the way on an appliance.
//
// QUBIQ_BENCH_STARTPROFILE=FILE writes a CPU profile of the first
// QUBIQ_BENCH_STARTPROFILE_FOR (default 3s) of the process, for the
// start-up to READY that no listener can catch.
func init() {
	if f := os.Getenv("QUBIQ_BENCH_STARTPROFILE"); f != "" && (len(os.Args) < 2 || os.Args[1] != "sandbox-exec") {
		os.Unsetenv("QUBIQ_BENCH_STARTPROFILE")
		d, err := time.ParseDuration(os.Getenv("QUBIQ_BENCH_STARTPROFILE_FOR"))
		if err != nil || d <= 0 {
			d = 3 * time.Second
		}
		if out, err := os.Create(f); err == nil && rpprof.StartCPUProfile(out) == nil {
			time.AfterFunc(d, func() { rpprof.StopCPUProfile(); out.Close() })
		}
	}
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
