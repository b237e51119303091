package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"qubiq.dev/edge/gateway"
)

type fakeDiag struct{ f gateway.Figures }

func (d fakeDiag) Figures(context.Context) gateway.Figures { return d.f }

type fakeHealth struct{ h gateway.HealthReport }

func (h fakeHealth) Health(context.Context) gateway.HealthReport { return h.h }

func figures() gateway.Figures {
	bounds := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	counts := make([]uint64, len(bounds)+1)
	counts[3], counts[14] = 8, 2 // 8 requests of at most 5 ms, 2 above 10 s
	return gateway.Figures{
		Devices: []gateway.DeviceInfo{
			{Name: "plc1", Driver: "modbus", State: "degraded", Tags: 4, Stats: &gateway.DeviceStats{
				Requests: 10, Errors: map[string]uint64{"timeout": 2, "exception": 0}, ErrorsTotal: 2, Timeouts: 2,
				Reconnects: 1, LastGood: time.Unix(1700000000, 500e6),
				Latency: gateway.LatencyHistogram{Bounds: bounds, Counts: counts, Count: 10, Sum: 25 * time.Second},
				Units:   []gateway.UnitBreaker{{Unit: 1, Breaker: "closed"}, {Unit: 2, Breaker: "open", Timeouts: 3}}}},
			{Name: "ua1", Driver: "opcua", State: "connected", Tags: 2, Stats: &gateway.DeviceStats{
				OPCUA: &gateway.OPCUAFigures{MonitoredItems: 2, Subscriptions: 1, PublishResponses: 7, KeepAlives: 3, DataChanges: 9, SessionsCreated: 1}}},
			{Name: "sim", Driver: "sim", State: "connected", Tags: 1},
		},
		Engine:  gateway.EngineFigures{Tags: 7, Changes: 120, Scans: 40, Overruns: 3},
		History: &gateway.HistoryFigures{Queue: 5, Committed: 100, Commits: 4, Dropped: 1},
		Sandbox: &gateway.SandboxFigures{Runs: map[string]uint64{"ok": 6, "timeout": 1}, Restarts: 2, Workers: 2, Live: 2,
			Queued: 1, Memory: map[int]uint64{0: 14 << 20}},
		Audit:  &gateway.AuditFigures{Enqueued: 9, Committed: 8},
		Alarms: &gateway.AlarmMetrics{Alarms: 1, ByState: map[string]int{"active_unacked": 1}, ActivationsTotal: 4},
	}
}

func newTest() *Metrics {
	return New(Config{Diagnostics: fakeDiag{figures()}, Version: "1.2.3",
		Health: fakeHealth{gateway.HealthReport{Status: gateway.HealthDegraded, Reasons: []string{"x"}, Warnings: []string{"w1", "w2"},
			MQTT: &gateway.MQTTHealth{Connected: true, OutboxDepth: 3, OutboxBytes: 300, OutboxDropped: 4, Accepted: 5, Refused: 6}}},
		Flows: func(context.Context) []gateway.FlowStatus {
			return []gateway.FlowStatus{{Name: "scale", State: gateway.FlowRunning, Queue: 2,
				Counters: gateway.FlowCounters{In: 5, Processed: 3, Dropped: 2}}}
		}})
}

// The figures become the series docs/metrics.md names, with their labels,
// and the exposition passes the linter (testutil.GatherAndLint).
func TestMetrics_Series(t *testing.T) {
	m := newTest()
	m.ObserveRequest("POST /api/v1/tags/read", 200, 3*time.Millisecond)
	m.ObserveRequest("POST /api/v1/tags/read", 200, 4*time.Millisecond)
	m.ObserveRequest("POST /api/v1/tags/write", 403, time.Millisecond)
	m.ObserveRequest("GET /api/v1/ws", 101, -1)
	want := map[string]float64{
		`qubiq_build_info{version="1.2.3"}`:                                                      1,
		`qubiq_device_requests_total{device="plc1",driver="modbus"}`:                             10,
		`qubiq_device_errors_total{device="plc1",driver="modbus",kind="timeout"}`:                2,
		`qubiq_device_errors_total{device="plc1",driver="modbus",kind="exception"}`:              0,
		`qubiq_device_reconnects_total{device="plc1",driver="modbus"}`:                           1,
		`qubiq_device_last_good_poll_timestamp_seconds{device="plc1",driver="modbus"}`:           1700000000.5,
		`qubiq_device_state{device="plc1",driver="modbus",state="degraded"}`:                     1,
		`qubiq_device_state{device="plc1",driver="modbus",state="connected"}`:                    0,
		`qubiq_device_tags{device="sim",driver="sim"}`:                                           1,
		`qubiq_device_unit_breaker_open{device="plc1",unit="2"}`:                                 1,
		`qubiq_device_unit_breaker_open{device="plc1",unit="1"}`:                                 0,
		`qubiq_device_unit_consecutive_timeouts{device="plc1",unit="2"}`:                         3,
		`qubiq_device_request_duration_seconds_bucket{device="plc1",driver="modbus",le="0.005"}`: 8,
		`qubiq_device_request_duration_seconds_bucket{device="plc1",driver="modbus",le="10"}`:    8,
		`qubiq_device_request_duration_seconds_bucket{device="plc1",driver="modbus",le="+Inf"}`:  10,
		`qubiq_device_request_duration_seconds_sum{device="plc1",driver="modbus"}`:               25,
		`qubiq_opcua_monitored_items{device="ua1"}`:                                              2,
		`qubiq_opcua_publish_responses_total{device="ua1"}`:                                      7,
		`qubiq_opcua_keepalives_total{device="ua1"}`:                                             3,
		`qubiq_opcua_data_changes_total{device="ua1"}`:                                           9,
		`qubiq_tags`:                                                               7,
		`qubiq_tag_changes_total`:                                                  120,
		`qubiq_scan_overruns_total`:                                                3,
		`qubiq_history_queue_samples`:                                              5,
		`qubiq_history_samples_committed_total`:                                    100,
		`qubiq_history_samples_dropped_total`:                                      1,
		`qubiq_sandbox_runs_total{result="ok"}`:                                    6,
		`qubiq_sandbox_runs_total{result="timeout"}`:                               1,
		`qubiq_sandbox_worker_restarts_total`:                                      2,
		`qubiq_sandbox_queue_runs`:                                                 1,
		`qubiq_sandbox_worker_memory_bytes{slot="0"}`:                              14 << 20,
		`qubiq_audit_records_committed_total`:                                      8,
		`qubiq_audit_pending_records`:                                              1,
		`qubiq_alarms{state="active_unacked"}`:                                     1,
		`qubiq_alarm_activations_total`:                                            4,
		`qubiq_flow_messages_in_total{flow="scale"}`:                               5,
		`qubiq_flow_messages_dropped_total{flow="scale"}`:                          2,
		`qubiq_flow_queue_messages{flow="scale"}`:                                  2,
		`qubiq_health_status{status="degraded"}`:                                   1,
		`qubiq_health_status{status="ok"}`:                                         0,
		`qubiq_health_warnings`:                                                    2,
		`qubiq_mqtt_connected`:                                                     1,
		`qubiq_mqtt_outbox_messages`:                                               3,
		`qubiq_mqtt_outbox_bytes`:                                                  300,
		`qubiq_mqtt_outbox_oldest_age_seconds`:                                     0,
		`qubiq_mqtt_outbox_dropped_total`:                                          4,
		`qubiq_mqtt_commands_total{result="accepted"}`:                             5,
		`qubiq_mqtt_commands_total{result="refused"}`:                              6,
		`qubiq_api_requests_total{code="200",route="POST /api/v1/tags/read"}`:      2,
		`qubiq_api_requests_total{code="403",route="POST /api/v1/tags/write"}`:     1,
		`qubiq_api_requests_total{code="101",route="GET /api/v1/ws"}`:              1,
		`qubiq_api_request_duration_seconds_count{route="POST /api/v1/tags/read"}`: 2,
	}
	got := scrape(t, m.Handler())
	for series, v := range want {
		g, ok := got[series]
		if !ok {
			t.Errorf("%s missing", series)
			continue
		}
		if g != v {
			t.Errorf("%s = %v, want %v", series, g, v)
		}
	}
	if _, ok := got[`qubiq_api_request_duration_seconds_count{route="GET /api/v1/ws"}`]; ok {
		t.Error("the WebSocket stream was timed")
	}
	if _, ok := got[`qubiq_device_requests_total{device="sim",driver="sim"}`]; ok {
		t.Error("the simulator, which keeps no statistics, got request series")
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("no Go runtime series (go_goroutines)")
	}
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// scrape gets the text exposition from h and returns every sample by its
// series text (name{labels sorted}).
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	return Parse(t, rec.Body)
}

// Parse parses a text exposition into samples by series text.
func Parse(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	fams, err := parseText(r)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					out[series(name+"_bucket", m.GetLabel(), "le", fmtLe(b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
				out[series(name+"_bucket", m.GetLabel(), "le", "+Inf")] = float64(h.GetSampleCount())
				out[series(name+"_count", m.GetLabel(), "", "")] = float64(h.GetSampleCount())
				out[series(name+"_sum", m.GetLabel(), "", "")] = h.GetSampleSum()
			case dto.MetricType_COUNTER:
				out[series(name, m.GetLabel(), "", "")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[series(name, m.GetLabel(), "", "")] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[series(name, m.GetLabel(), "", "")] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// The diagnostics listener serves /metrics, and /debug/pprof/ only when
// asked for.
func TestServe_PprofOnlyWhenAsked(t *testing.T) {
	m := newTest()
	for _, withPprof := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Serve(ctx, ln, withPprof) }()
		base := "http://" + ln.Addr().String()
		if code := get(t, base+"/metrics"); code != 200 {
			t.Errorf("pprof %v: /metrics %d", withPprof, code)
		}
		want := 404
		if withPprof {
			want = 200
		}
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			if code := get(t, base+p); code != want {
				t.Errorf("pprof %v: %s answered %d, want %d", withPprof, p, code, want)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestObserveRequest_AllocatesNothingOnceSeen(t *testing.T) {
	m := newTest()
	m.ObserveRequest("GET /api/v1/tags", 200, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { m.ObserveRequest("GET /api/v1/tags", 200, time.Millisecond) }); n != 0 {
		t.Errorf("ObserveRequest allocates %v times per call, want 0", n)
	}
}
