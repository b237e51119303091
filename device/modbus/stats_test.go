package modbus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

// The statistics count every request with its outcome: good reads, an
// exception, timeouts (which open unit 2's breaker and make the link
// drop its connection: two reconnects), a write, and a third reconnect
// after the device closed the connection.
func TestDriver_Stats(t *testing.T) {
	srv := devicetest.NewModbusServer(t)
	srv.SetHolding(0, 7, 0)
	var mode atomic.Int32 // 0 answer, 1 exception 2 on HR50, 2 close the connection once
	srv.SetHook(func(r devicetest.Request) *devicetest.Reply {
		switch {
		case r.Unit == 2:
			return &devicetest.Reply{NoReply: true}
		case r.Address() == 50:
			return &devicetest.Reply{Exception: 2}
		case mode.Load() == 2:
			mode.Store(0)
			return &devicetest.Reply{NoReply: true, Close: true}
		}
		return nil
	})
	d := newTestDriver(t, srv, func(c *Config) {
		c.Breaker = BreakerConfig{Timeouts: 2, Backoff: device.Duration(time.Hour)}
		c.Timeout = device.Duration(time.Second) // a loaded machine must not turn a good read into a timeout
	})
	before := time.Now()
	if s := d.Stats(); s.Requests != 0 || s.ErrorsTotal != 0 || !s.LastGood.IsZero() || s.P50 != 0 {
		t.Fatalf("fresh driver: %+v, want nothing counted", s)
	}
	for range 3 {
		wantGood(t, "unit 1", read1(t, d, pt("HR0", value.Uint16, "")), uint64(7))
	}
	wantQuality(t, "exception", read1(t, d, pt("HR50", value.Uint16, "")), value.BadConfigurationError)
	u2 := pt("HR0", value.Uint16, "")
	u2.UnitID = 2
	for range 2 {
		wantQuality(t, "unit 2", read1(t, d, u2), value.BadTimeout)
	}
	wantQuality(t, "unit 2 demoted", read1(t, d, u2), value.BadNotConnected) // no request
	if err := devicetest.Write(context.Background(), d, pt("HR1", value.Uint16, ""), 5); err != nil {
		t.Fatalf("write: %v", err)
	}
	mode.Store(2)
	// The device closes the connection without answering: the read is
	// retried once on a new connection (a reconnect), which answers.
	wantGood(t, "after the device closed", read1(t, d, pt("HR0", value.Uint16, "")), uint64(7))

	s := d.Stats()
	// 3 good reads, 1 exception, 2 timeouts, 1 write, 1 failed + 1 good read.
	if s.Requests != 9 {
		t.Errorf("requests = %d, want 9", s.Requests)
	}
	want := map[string]uint64{"timeout": 2, "exception": 1, "not_connected": 1, "communication": 0, "configuration": 0}
	for k, n := range want {
		if s.Errors[k] != n {
			t.Errorf("errors[%s] = %d, want %d (all: %v)", k, s.Errors[k], n, s.Errors)
		}
	}
	if s.Timeouts != 2 || s.ErrorsTotal != 4 || s.Reconnects != 3 {
		t.Errorf("timeouts %d, errors %d, reconnects %d; want 2, 4, 3", s.Timeouts, s.ErrorsTotal, s.Reconnects)
	}
	if s.LastGood.Before(before) || s.LastGood.Location() != time.UTC {
		t.Errorf("last good %v, want a UTC time after %v", s.LastGood, before)
	}
	// 7 answers and 2 timeouts of 1 s: the median is an answer's, the
	// 99th percentile in the timeouts' bucket (1 s, 2.5 s].
	if s.Latency.Count != 9 || s.P50 <= 0 || s.P50 >= time.Second || s.P99 <= time.Second || s.P99 > 2500*time.Millisecond {
		t.Errorf("latency: %d samples, p50 %s, p99 %s; want 9 samples, 0 < p50 < 1s < p99 <= 2.5s", s.Latency.Count, s.P50, s.P99)
	}
	if len(s.Units) != 2 {
		t.Fatalf("units = %+v, want units 1 and 2", s.Units)
	}
	if u := s.Units[0]; u.Unit != 1 || u.Breaker != device.BreakerClosed || u.Timeouts != 0 {
		t.Errorf("unit 1 = %+v, want closed with no timeouts", u)
	}
	if u := s.Units[1]; u.Unit != 2 || u.Breaker != device.BreakerOpen || u.Timeouts != 2 || u.DemotedUntil.Before(time.Now().Add(59*time.Minute)) {
		t.Errorf("unit 2 = %+v, want open for the hour's backoff after 2 timeouts", u)
	}
}
