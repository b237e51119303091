package opcua

import (
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// The statistics of a subscribed and read device: the read counts as a
// good request, the subscription's monitored items, publish responses and
// data changes are counted, and one session was created (no reconnect).
func TestDriver_Stats(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	d := openDriver(t, testConfig(t, srv, t.TempDir()))
	r := subscribe(t, d, SubscribeOptions{}, vpoint("Counter", value.Auto), vpoint("Temp", value.Float64))
	first := waitValue(t, r, 0, 5*time.Second, "a first Counter value", isGood)
	waitValue(t, r, 0, 5*time.Second, "Counter to change", func(v value.VQT) bool {
		return isGood(v) && counterOf(t, v) > counterOf(t, first)
	})
	if v := readOne(t, d, vpoint("Temp", value.Float64)); v.Quality != value.Good {
		t.Fatalf("read Temp = %v, want Good", v)
	}
	s := d.Stats()
	if s.Requests < 1 || s.ErrorsTotal != 0 || s.LastGood.IsZero() || s.Latency.Count < 1 || s.P50 <= 0 {
		t.Errorf("requests %d, errors %d (%v), last good %v, latency samples %d, p50 %s; want >= 1 good read with its latency",
			s.Requests, s.ErrorsTotal, s.Errors, s.LastGood, s.Latency.Count, s.P50)
	}
	o := s.OPCUA
	if o == nil {
		t.Fatal("no OPC UA figures")
	}
	if o.MonitoredItems != 2 || o.BadItems != 0 || o.Subscriptions != 1 {
		t.Errorf("items %d (bad %d), subscriptions %d; want 2 (0), 1", o.MonitoredItems, o.BadItems, o.Subscriptions)
	}
	if o.PublishResponses < 2 || o.DataChanges < 3 || o.PublishRate <= 0 {
		t.Errorf("publish responses %d, data changes %d, rate %g/s; want >= 2, >= 3 (two Counter values and Temp), > 0",
			o.PublishResponses, o.DataChanges, o.PublishRate)
	}
	if o.SessionsCreated != 1 || s.Reconnects != 0 {
		t.Errorf("sessions %d, reconnects %d; want 1, 0", o.SessionsCreated, s.Reconnects)
	}
}
