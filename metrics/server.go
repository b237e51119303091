package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// DefaultListen is the diagnostics listener's default address
// (diagnostics.listen): loopback only, the port Prometheus exporters
// conventionally take in this range.
const DefaultListen = "127.0.0.1:9464"

// Mux returns the diagnostics listener's routes: GET /metrics, and with
// withPprof the net/http/pprof handlers under /debug/pprof/ (index,
// cmdline, profile, symbol, trace and the named profiles: heap,
// goroutine, allocs, block, mutex, threadcreate). Anything else is 404.
func (m *Metrics) Mux(withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.handler)
	if withPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Serve serves Mux(withPprof) on ln until ctx ends, then shuts down
// (requests in flight get 5 s). A CPU profile takes its ?seconds= (30 by
// default), so the write deadline leaves room for up to 10 minutes.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener, withPprof bool) error {
	srv := &http.Server{Handler: m.Mux(withPprof), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 11 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
