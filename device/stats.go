package device

import (
	"math"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/value"
)

// ErrorKind is what went wrong with one request to a device, for the
// per-device statistics (Counters): a small fixed set, so the counters are
// an array of atomics and the hot path allocates nothing.
type ErrorKind uint8

// Error kinds of Counters.Observe. ErrNone is a request that succeeded.
const (
	ErrNone ErrorKind = iota
	// ErrTimeout: no answer within the device's timeout (Bad_Timeout).
	ErrTimeout
	// ErrNotConnected: no connection (dial failed, backing off, the device
	// closed it; Bad_NotConnected).
	ErrNotConnected
	// ErrCommunication: a bad frame or another I/O error
	// (Bad_CommunicationError).
	ErrCommunication
	// ErrException: the device answered with a refusal (a Modbus exception
	// response, an OPC UA bad service or operation result).
	ErrException
	// ErrConfiguration: the request does not fit the device or the
	// configuration (Bad_ConfigurationError raised before sending).
	ErrConfiguration
	numErrorKinds
)

// ErrorKinds lists the error kinds' names in order (ErrTimeout first), as
// they appear in Stats.Errors, GET /api/v1/devices and the metrics' "kind"
// label (docs/metrics.md).
var ErrorKinds = []string{"timeout", "not_connected", "communication", "exception", "configuration"}

// String names the kind ("timeout", ...); "" for ErrNone.
func (k ErrorKind) String() string {
	if k == ErrNone || k >= numErrorKinds {
		return ""
	}
	return ErrorKinds[k-1]
}

// KindOf maps a failed request's quality to its error kind: Bad_Timeout is
// ErrTimeout, Bad_NotConnected ErrNotConnected, Bad_ConfigurationError
// ErrConfiguration, Bad_DeviceFailure and the other refusals ErrException,
// Bad_CommunicationError (and anything else) ErrCommunication; a Good or
// Uncertain quality is ErrNone.
func KindOf(q value.Quality) ErrorKind {
	switch {
	case !q.IsBad():
		return ErrNone
	case q == value.BadTimeout:
		return ErrTimeout
	case q == value.BadNotConnected:
		return ErrNotConnected
	case q == value.BadConfigurationError:
		return ErrConfiguration
	case q == value.BadCommunicationError:
		return ErrCommunication
	}
	return ErrException
}

// LatencyBuckets are the upper bounds, in seconds, of the request latency
// histogram every driver keeps (Counters); the metrics export them as
// they are (qubiq_device_request_duration_seconds), and Stats.P50 and P99
// are estimated from them.
var LatencyBuckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Counters are one driver's running request statistics, updated on the
// hot path with atomics only (no lock, no allocation per request) and read
// as a Stats snapshot. The zero Counters is ready.
type Counters struct {
	requests   atomic.Uint64
	errs       [numErrorKinds]atomic.Uint64
	reconnects atomic.Uint64
	lastGood   atomic.Int64 // unix nanos of the last successful read; 0: none
	lastErr    atomic.Int64 // unix nanos of the last failed request; 0: none

	buckets [len(LatencyBuckets) + 1]atomic.Uint64 // the last one is +Inf
	sumNs   atomic.Uint64
}

// Observe counts one request: its outcome (ErrNone when it succeeded), its
// latency on the wire (lat < 0: it never reached the wire, so no latency
// is recorded), and whether it was a read (a poll), whose success is the
// device's "last good poll".
func (c *Counters) Observe(kind ErrorKind, lat time.Duration, read bool) {
	c.requests.Add(1)
	now := time.Now().UnixNano()
	if kind != ErrNone && kind < numErrorKinds {
		c.errs[kind].Add(1)
		c.lastErr.Store(now)
	} else if read {
		c.lastGood.Store(now)
	}
	if lat >= 0 {
		s := lat.Seconds()
		i := 0
		for i < len(LatencyBuckets) && s > LatencyBuckets[i] {
			i++
		}
		c.buckets[i].Add(1)
		c.sumNs.Add(uint64(lat))
	}
}

// Reconnected counts a connection made again after an earlier one was
// lost or dropped (not the first connection).
func (c *Counters) Reconnected() { c.reconnects.Add(1) }

// Snapshot returns the counters now. Units and OPCUA are the driver's to
// fill in.
func (c *Counters) Snapshot() Stats {
	s := Stats{Requests: c.requests.Load(), Reconnects: c.reconnects.Load(), Errors: make(map[string]uint64, len(ErrorKinds))}
	for k := ErrTimeout; k < numErrorKinds; k++ {
		n := c.errs[k].Load()
		s.Errors[k.String()] = n
		s.ErrorsTotal += n
	}
	s.Timeouts = s.Errors["timeout"]
	if t := c.lastGood.Load(); t != 0 {
		s.LastGood = time.Unix(0, t).UTC()
	}
	if t := c.lastErr.Load(); t != 0 {
		s.LastError = time.Unix(0, t).UTC()
	}
	s.Latency.Counts = make([]uint64, len(c.buckets))
	for i := range c.buckets {
		s.Latency.Counts[i] = c.buckets[i].Load()
		s.Latency.Count += s.Latency.Counts[i]
	}
	s.Latency.Sum = time.Duration(c.sumNs.Load())
	s.P50, s.P99 = s.Latency.Quantile(0.5), s.Latency.Quantile(0.99)
	return s
}

// Stats is a snapshot of one device's statistics since its driver was
// built (a project change that keeps the device keeps its driver): the
// requests sent (reads, writes, keep-alive reads), the failed ones by
// kind (ErrorKinds; ErrorsTotal their sum, Timeouts the "timeout" ones),
// connections made again after a loss, the last successful read and the
// last failure (zero: never), the latency histogram of the requests that
// reached the wire with its estimated median and 99th percentile (0 with
// no sample), the Modbus circuit breaker per unit id, and the OPC UA
// subscription figures (nil for other drivers).
type Stats struct {
	Requests    uint64
	Errors      map[string]uint64
	ErrorsTotal uint64
	Timeouts    uint64
	Reconnects  uint64
	LastGood    time.Time
	LastError   time.Time
	Latency     Latency
	P50, P99    time.Duration
	Units       []UnitStats
	OPCUA       *OPCUAStats
}

// Latency is a histogram of request latencies: Counts[i] requests took at
// most LatencyBuckets[i] seconds (and more than the bound before; the last
// element counts those above every bound), Count their total and Sum their
// total time.
type Latency struct {
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// Quantile estimates the q-quantile (0 < q < 1) by linear interpolation
// inside the bucket that holds it, as Prometheus's histogram_quantile
// does; a quantile in the last (+Inf) bucket is the highest bound. 0 with
// no sample.
func (l Latency) Quantile(q float64) time.Duration {
	if l.Count == 0 || len(l.Counts) != len(LatencyBuckets)+1 {
		return 0
	}
	rank := q * float64(l.Count)
	var cum uint64
	for i, n := range l.Counts {
		if n == 0 || float64(cum+n) < rank {
			cum += n
			continue
		}
		if i == len(LatencyBuckets) {
			return seconds(LatencyBuckets[i-1])
		}
		lo := 0.0
		if i > 0 {
			lo = LatencyBuckets[i-1]
		}
		hi := LatencyBuckets[i]
		return seconds(lo + (hi-lo)*(rank-float64(cum))/float64(n))
	}
	return seconds(LatencyBuckets[len(LatencyBuckets)-1])
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// Breaker states of UnitStats.Breaker (Modbus circuit breaker,
// docs/modbus.md).
const (
	BreakerClosed  = "closed"  // requests go out
	BreakerOpen    = "open"    // demoted: no request until DemotedUntil
	BreakerProbing = "probing" // the backoff ran out: the next request probes the unit
)

// UnitStats is one Modbus unit's circuit breaker: its unit id, state
// (BreakerClosed, BreakerOpen, BreakerProbing), consecutive timeouts and,
// while open, until when.
type UnitStats struct {
	Unit         int
	Breaker      string
	Timeouts     int
	DemotedUntil time.Time
}

// OPCUAStats are an OPC UA device's subscription figures: monitored items
// (all, and those bad now), subscriptions, publish responses received with
// data and as keep-alives (OPC UA Part 4 §5.13.1.1), data changes
// delivered, and the publish responses per second since the current
// session was made (0 while down).
type OPCUAStats struct {
	MonitoredItems    int
	BadItems          int
	Subscriptions     int
	PublishResponses  uint64
	KeepAlives        uint64
	DataChanges       uint64
	PublishRate       float64
	SessionsCreated   uint64
	SessionReactivate uint64
}

// StatsReporter is implemented by drivers that keep request statistics
// (Modbus, OPC UA). The engine and the service layer show them on GET
// /api/v1/devices and the metrics export them.
type StatsReporter interface {
	Stats() Stats
}
