package device

import (
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

func TestCounters_SnapshotAndQuantiles(t *testing.T) {
	var c Counters
	if s := c.Snapshot(); s.Requests != 0 || s.P50 != 0 || s.P99 != 0 || len(s.Errors) != len(ErrorKinds) {
		t.Fatalf("zero counters: %+v", s)
	}
	// 98 requests of 3 ms (bucket 2.5..5 ms), one of 300 ms (250..500 ms),
	// one timeout of 2 s (1..2.5 s), one that never reached the wire.
	for range 98 {
		c.Observe(ErrNone, 3*time.Millisecond, true)
	}
	c.Observe(ErrNone, 300*time.Millisecond, false)
	c.Observe(ErrTimeout, 2*time.Second, true)
	c.Observe(ErrNotConnected, -1, true)
	c.Reconnected()
	s := c.Snapshot()
	if s.Requests != 101 || s.Timeouts != 1 || s.Errors["not_connected"] != 1 || s.ErrorsTotal != 2 || s.Reconnects != 1 {
		t.Errorf("snapshot %+v", s)
	}
	if s.Latency.Count != 100 || s.Latency.Sum != 98*3*time.Millisecond+300*time.Millisecond+2*time.Second {
		t.Errorf("latency count %d sum %s", s.Latency.Count, s.Latency.Sum)
	}
	// The median's rank 50 of 98 in the 2.5..5 ms bucket: 2.5 + 2.5×50/98 ms.
	if want := seconds(0.0025 + 0.0025*50/98); s.P50 < want-time.Microsecond || s.P50 > want+time.Microsecond {
		t.Errorf("p50 = %s, want %s", s.P50, want)
	}
	// Rank 99 is the 300 ms request, alone in 250..500 ms: its top.
	if s.P99 != 500*time.Millisecond {
		t.Errorf("p99 = %s, want 500ms", s.P99)
	}
	if s.LastGood.IsZero() || s.LastError.IsZero() {
		t.Errorf("last good %v, last error %v; want both set", s.LastGood, s.LastError)
	}
}

func TestCounters_ObserveAllocatesNothing(t *testing.T) {
	var c Counters
	if n := testing.AllocsPerRun(100, func() { c.Observe(ErrTimeout, time.Millisecond, true) }); n != 0 {
		t.Errorf("Observe allocates %v times per call, want 0", n)
	}
}

func TestKindOf(t *testing.T) {
	for q, want := range map[value.Quality]ErrorKind{
		value.Good: ErrNone, value.Uncertain: ErrNone, value.BadTimeout: ErrTimeout,
		value.BadNotConnected: ErrNotConnected, value.BadCommunicationError: ErrCommunication,
		value.BadDeviceFailure: ErrException, value.BadConfigurationError: ErrConfiguration,
	} {
		if got := KindOf(q); got != want {
			t.Errorf("KindOf(%s) = %q, want %q", q, got, want)
		}
	}
}

// BenchmarkCounters_Observe is the cost a driver pays per request for its
// statistics (atomics only; 0 allocations).
func BenchmarkCounters_Observe(b *testing.B) {
	var c Counters
	b.ReportAllocs()
	for b.Loop() {
		c.Observe(ErrNone, 3*time.Millisecond, true)
	}
}
