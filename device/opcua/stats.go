package opcua

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
)

// stats are the driver's request and subscription counters: the request
// statistics every driver keeps (device.Counters: reads, writes and
// keep-alive reads) and the publish figures of the subscriptions (OPC UA
// Part 4 §5.13.1.1), all atomics.
type stats struct {
	device.Counters
	publishes   atomic.Uint64 // publish responses with data
	keepAlives  atomic.Uint64 // publish responses without data (keep-alive messages)
	dataChanges atomic.Uint64 // monitored item notifications delivered
	sessions    atomic.Uint64 // sessions created
	reactivated atomic.Uint64 // sessions re-activated on a new channel
	sessStart   atomic.Int64  // unix nanos the current session came up; 0 while down
	sessPubs    atomic.Uint64 // publish responses of the current session
}

// kindOfErr is the error kind of a failed service call: a connection
// that is gone or a request never sent is ErrNotConnected, a timeout
// ErrTimeout, a bad service result from the server ErrException, anything
// else ErrCommunication.
func kindOfErr(err error) device.ErrorKind {
	switch {
	case err == nil:
		return device.ErrNone
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ua.StatusBadTimeout):
		return device.ErrTimeout
	case isConnErr(err) || notSent(err):
		return device.ErrNotConnected
	}
	if _, ok := asStatus(err); ok {
		return device.ErrException
	}
	return device.ErrCommunication
}

// observe counts one service call that started at start.
func (d *Driver) observe(start time.Time, err error, read bool) {
	d.stats.Observe(kindOfErr(err), time.Since(start), read)
}

// sessionUp notes a session that came up: a new one, or one re-activated
// on a new channel; any after the first is a reconnect.
func (d *Driver) sessionUp(reactivated bool) {
	if d.stats.sessions.Load()+d.stats.reactivated.Load() > 0 {
		d.stats.Reconnected()
	}
	if reactivated {
		d.stats.reactivated.Add(1)
	} else {
		d.stats.sessions.Add(1)
	}
	d.stats.sessPubs.Store(0)
	d.stats.sessStart.Store(time.Now().UnixNano())
}

// sessionDown notes that the session is gone.
func (d *Driver) sessionDown() { d.stats.sessStart.Store(0) }

// published counts one publish response.
func (d *Driver) published(data bool) {
	if data {
		d.stats.publishes.Add(1)
	} else {
		d.stats.keepAlives.Add(1)
	}
	d.stats.sessPubs.Add(1)
}

// Stats returns the device's statistics (device.StatsReporter): the
// requests (reads, writes, keep-alive reads of the server's clock) with
// failures by kind, reconnects (sessions made or re-activated after the
// first), the last good read, latency, and the subscription figures:
// monitored items and the bad ones, subscriptions live on the server,
// publish responses with data and keep-alives, data changes delivered,
// and the publish responses per second of the current session.
func (d *Driver) Stats() device.Stats {
	s := d.stats.Snapshot()
	o := &device.OPCUAStats{PublishResponses: d.stats.publishes.Load(), KeepAlives: d.stats.keepAlives.Load(),
		DataChanges: d.stats.dataChanges.Load(), SessionsCreated: d.stats.sessions.Load(),
		SessionReactivate: d.stats.reactivated.Load()}
	if t := d.stats.sessStart.Load(); t != 0 {
		if el := time.Since(time.Unix(0, t)).Seconds(); el > 0 {
			o.PublishRate = float64(d.stats.sessPubs.Load()) / el
		}
	}
	for _, g := range d.groupsSnapshot() {
		g.mu.Lock()
		if g.subID != 0 && !g.removed {
			o.Subscriptions++
		}
		g.mu.Unlock()
	}
	d.mu.Lock()
	o.MonitoredItems, o.BadItems = d.allItems, d.badItems
	d.mu.Unlock()
	s.OPCUA = o
	return s
}
