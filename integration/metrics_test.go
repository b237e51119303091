//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"qubiq.dev/edge/internal/peers"
)

// metricsDaemon runs qubiqd against a pymodbus device, with the
// diagnostics listener on a free loopback port (pprof on) and a worker
// limit turned off (a health warning).
func metricsDaemon(t *testing.T) (*peers.Modbus, *daemon, string) {
	t.Helper()
	mb := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 42, 1: 7}}})
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: plc1, driver: modbus, url: "tcp://127.0.0.1:%d", unit_id: 1, timeout: 500ms}
  - {name: sim, driver: sim}
tags:
  - {path: Plant/Level, device: plc1, address: HR0, type: int16, scan: 100ms, history: {enabled: true}}
  - {path: Plant/Setpoint, device: plc1, address: HR1, type: int16, scan: 100ms}
  - {path: Plant/Memory, device: sim, address: memory, type: float64}
`, mb.Port))
	diag := fmt.Sprintf("127.0.0.1:%d", peers.FreePort(t))
	cfg, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("python: {"), []byte("python: {memory_max: unlimited, "), 1)
	cfg = append(cfg, fmt.Sprintf("diagnostics: {listen: %q, pprof: true}\n", diag)...)
	if err := os.WriteFile(d.cfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	d.start()
	return mb, d, "http://" + diag
}

// scrapeURL parses the text exposition at url into samples keyed by
// name{labels in the order they came}.
func scrapeURL(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: not the text exposition format: %v", url, err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// The real qubiqd's metrics, scraped on the diagnostics listener and on
// GET /api/v1/metrics: the device's requests (one per 100 ms scan, no
// error), latency samples, last good poll, tag count, changes, the API's
// requests by route and code, the health warning; pprof on the
// diagnostics listener only.
func TestMetrics_RealDaemonWithPymodbus(t *testing.T) {
	_, d, diag := metricsDaemon(t)
	op := d.apiKey("op", []string{"tag:read", "tag:write", "script:execute"}, "operate", "designer")
	code := "def ok(args):\n    return 1\n\ndef boom(args):\n    raise ValueError('boom')\n"
	if st, body := d.call("PUT", "/api/v1/scripts/m", op, map[string]any{"code": code}, nil); st != 200 {
		t.Fatalf("save script: %d %s", st, body)
	}
	for entry, want := range map[string]int{"ok": 200, "boom": 422} {
		if st, body := d.call("POST", "/api/v1/scripts/m/"+entry+"/run", op, map[string]any{"args": map[string]any{}}, nil); st != want {
			t.Fatalf("run m.%s: %d %s, want %d", entry, st, body, want)
		}
	}
	waitFor(t, 10*time.Second, "Plant/Level Good", func() (bool, string) {
		v := d.read(op, "Plant/Level")["Plant/Level"]
		return v.Quality == "Good" && v.Value.String() == "42", fmt.Sprint(v)
	})
	if st, body := d.call("POST", "/api/v1/tags/write", op, map[string]any{"writes": []map[string]any{{"path": "Plant/Setpoint", "value": 55}}}, nil); st != 200 {
		t.Fatalf("write: %d %s", st, body)
	}
	start := time.Now()
	waitFor(t, 10*time.Second, "10 requests to plc1", func() (bool, string) {
		m := scrapeURL(t, diag+"/metrics")
		n := m["qubiq_device_requests_total{device=plc1,driver=modbus}"]
		return n >= 10, fmt.Sprint(n)
	})
	var health struct {
		Version string `json:"version"`
	}
	if st, body := d.call("GET", "/api/v1/health", "", nil, &health); st != 200 {
		t.Fatalf("health: %d %s", st, body)
	}
	m := scrapeURL(t, diag+"/metrics")
	if v, ok := m["qubiq_build_info{version="+health.Version+"}"]; !ok || v != 1 {
		t.Errorf("qubiq_build_info{version=%s} = %v (present %v), want 1: the version health reports", health.Version, v, ok)
	}
	for series, check := range map[string]func(float64) bool{
		"qubiq_device_requests_total{device=plc1,driver=modbus}":                   func(v float64) bool { return v >= 10 },
		"qubiq_device_errors_total{device=plc1,driver=modbus,kind=timeout}":        func(v float64) bool { return v == 0 },
		"qubiq_device_errors_total{device=plc1,driver=modbus,kind=exception}":      func(v float64) bool { return v == 0 },
		"qubiq_device_request_duration_seconds{device=plc1,driver=modbus}_count":   func(v float64) bool { return v >= 10 },
		"qubiq_device_last_good_poll_timestamp_seconds{device=plc1,driver=modbus}": func(v float64) bool { return v > float64(start.Add(-5*time.Second).Unix()) },
		"qubiq_device_state{device=plc1,driver=modbus,state=connected}":            func(v float64) bool { return v == 1 },
		"qubiq_device_unit_breaker_open{device=plc1,unit=1}":                       func(v float64) bool { return v == 0 },
		"qubiq_device_tags{device=sim,driver=sim}":                                 func(v float64) bool { return v == 1 },
		"qubiq_tags":                          func(v float64) bool { return v == 3 },
		"qubiq_tag_changes_total":             func(v float64) bool { return v >= 2 },
		"qubiq_scans_total":                   func(v float64) bool { return v >= 10 },
		"qubiq_audit_records_committed_total": func(v float64) bool { return v >= 1 },
		"qubiq_sandbox_workers":               func(v float64) bool { return v == 2 },
		"qubiq_health_warnings":               func(v float64) bool { return v == 1 },
		"qubiq_api_requests_total{code=200,route=POST /api/v1/tags/write}":       func(v float64) bool { return v == 1 },
		"qubiq_api_requests_total{code=201,route=POST /api/v1/apikeys}":          func(v float64) bool { return v == 1 },
		"qubiq_api_request_duration_seconds{route=POST /api/v1/tags/read}_count": func(v float64) bool { return v >= 1 },
	} {
		v, ok := m[series]
		if !ok || !check(v) {
			t.Errorf("%s = %v (present %v)", series, v, ok)
		}
	}
	if _, ok := m["qubiq_device_requests_total{device=sim,driver=sim}"]; ok {
		t.Error("the simulator has request series; it keeps no statistics")
	}
	// The same handler under /api/v1 (the route table: GET /metrics needs nothing).
	if api := scrapeURL(t, d.url+"/api/v1/metrics"); api["qubiq_tags"] != 3 {
		t.Errorf("GET /api/v1/metrics: qubiq_tags = %v, want 3", api["qubiq_tags"])
	}
	for url, want := range map[string]int{diag + "/debug/pprof/": 200, diag + "/debug/pprof/heap?debug=1": 200,
		d.url + "/debug/pprof/": 404, diag + "/api/v1/health": 404} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", url, resp.StatusCode, want)
		}
	}
	// The device's statistics on REST, and the warning in health.
	var dev struct {
		Stats struct {
			Requests uint64            `json:"requests"`
			Errors   map[string]uint64 `json:"errors"`
			LastGood string            `json:"last_good"`
			P50      float64           `json:"latency_p50_ms"`
			Units    []struct {
				UnitID  int    `json:"unit_id"`
				Breaker string `json:"breaker"`
			} `json:"units"`
		} `json:"stats"`
	}
	if st, body := d.call("GET", "/api/v1/devices/plc1", op, nil, &dev); st != 200 || dev.Stats.Requests < 10 ||
		dev.Stats.LastGood == "" || dev.Stats.P50 <= 0 || len(dev.Stats.Units) != 1 || dev.Stats.Units[0].Breaker != "closed" {
		t.Errorf("GET /api/v1/devices/plc1: %d %s", st, body)
	}
	var h struct {
		Warnings []string `json:"warnings"`
	}
	if st, body := d.call("GET", "/api/v1/health", "", nil, &h); st != 200 || len(h.Warnings) != 1 ||
		h.Warnings[0] != "python.memory_max: unlimited: script workers run without that limit" {
		t.Errorf("health warnings: %d %s", st, body)
	}
	if !strings.Contains(d.logs(), "python.memory_max: unlimited: script workers run without that limit") {
		t.Error("the warning is not in the start-up log")
	}
}
