// Package metrics exports the appliance's figures in the Prometheus text
// exposition format (docs/metrics.md): the devices with their request
// statistics, the tag engine, history, the script sandbox, the audit log,
// flows, alarms, the REST API's requests, and the Go runtime and process.
//
// It is a front door like the API: it reads the service layer's figures
// (gateway.Diagnostics, gateway.Flows, gateway.Health) at each scrape, and
// keeps only what no part counts itself, the API's requests by route and
// status code (ObserveRequest, which the API's middleware calls). It
// serves them on the diagnostics listener (Serve: loopback by default,
// with net/http/pprof when asked for) and as a handler the API mounts at
// GET /api/v1/metrics. The daemon wires it.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"qubiq.dev/edge/gateway"
)

// Config says where the figures come from. Diagnostics is required; Flows
// and Health may be nil (no flow series, no health series). Version is the
// daemon's version (qubiq_build_info). ScrapeTimeout bounds the reading of
// the figures at one scrape (default 5 s).
type Config struct {
	Diagnostics   gateway.Diagnostics
	Flows         func(ctx context.Context) []gateway.FlowStatus
	Health        gateway.Health
	Version       string
	ScrapeTimeout time.Duration
}

// Metrics holds the registry of every series and the API's request
// counters. Build it with New; it is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	handler  http.Handler
}

// APIBuckets are the upper bounds, in seconds, of the API request latency
// histogram (qubiq_api_request_duration_seconds).
var APIBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// New builds the registry: the appliance's collector over cfg, the API's
// request counters, and the Go runtime and process collectors (go_*,
// process_*).
func New(cfg Config) *Metrics {
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = 5 * time.Second
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qubiq_api_requests_total",
		Help: "REST API requests answered, by route pattern and HTTP status code."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "qubiq_api_request_duration_seconds",
		Help: "Time to answer a REST API request, by route pattern (WebSocket streams are not timed).", Buckets: APIBuckets},
		[]string{"route"})
	m.reg.MustRegister(m.requests, m.latency, &collector{cfg: cfg},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// Handler serves the metrics in the text exposition format (or
// OpenMetrics, when the scraper asks for it).
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the registry of every series, for tests that gather them.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveRequest counts one answered API request: its route pattern ("POST
// /api/v1/tags/read"; requests that matched no route are counted as
// "unmatched"), its status code, and how long it took (d < 0: not timed,
// a stream). It allocates nothing once a route and code have been seen.
func (m *Metrics) ObserveRequest(route string, code int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(route, codeText(code)).Inc()
	if d >= 0 {
		m.latency.WithLabelValues(route).Observe(d.Seconds())
	}
}

var codes [600]string

func init() {
	for i := range codes {
		codes[i] = strconv.Itoa(i)
	}
}

func codeText(code int) string {
	if code >= 0 && code < len(codes) {
		return codes[code]
	}
	return strconv.Itoa(code)
}

// ServeHTTP serves the metrics (Handler), so Metrics is the API's
// api.Metrics.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
