package api

import (
	"net/http"
	"time"

	"qubiq.dev/edge/auth"
)

// Metrics is what the API needs of the metrics (package metrics): the
// exposition handler of GET /api/v1/metrics, and the counter of answered
// requests that the middleware feeds (qubiq_api_requests_total,
// qubiq_api_request_duration_seconds; docs/metrics.md).
type Metrics interface {
	http.Handler
	// ObserveRequest counts one answered request: its route pattern
	// ("POST /api/v1/tags/read"), status code and duration (d < 0: a
	// stream, not timed). It must not block.
	ObserveRequest(route string, code int, d time.Duration)
}

// metricsRoutes: the route table's "GET /metrics | nothing (metrics may be
// bound to loopback)", under /api/v1 on the API's listener; the daemon
// also serves the same handler on its diagnostics listener (loopback by
// default; docs/metrics.md).
var metricsRoutes = []route{
	{method: "GET", path: prefix + "/metrics", need: public, dep: depMetrics, handle: (*Server).metrics},
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	s.deps.Metrics.ServeHTTP(w, r)
	return nil
}

// observe feeds one answered request to the metrics, when there are any.
// A stream (the WebSocket) is counted but not timed.
func (s *Server) observe(rt route, target string, status int, took time.Duration) {
	if s.deps.Metrics == nil {
		return
	}
	if rt.stream {
		took = -1
	}
	if status == 0 {
		status = http.StatusOK
	}
	s.deps.Metrics.ObserveRequest(target, status, took)
}
