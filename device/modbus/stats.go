package modbus

import (
	"slices"
	"time"

	"qubiq.dev/edge/device"
)

// Stats returns the device's request statistics (device.StatsReporter):
// every request the link sent or could not send (reads, writes, the read
// of a register-bit write), failures by kind, reconnects, the last good
// poll, latency, and each unit's circuit breaker (docs/modbus.md, "The
// circuit breaker"), sorted by unit id. A unit that has not answered or
// timed out yet is not listed; a demoted read sends nothing and is not
// counted as a request.
func (d *Driver) Stats() device.Stats {
	s := d.stats.Snapshot()
	now := time.Now()
	d.mu.Lock()
	for id, u := range d.units {
		us := device.UnitStats{Unit: int(id), Breaker: device.BreakerClosed, Timeouts: u.timeouts}
		switch {
		case u.demotedUntil.IsZero():
		case now.Before(u.demotedUntil):
			us.Breaker, us.DemotedUntil = device.BreakerOpen, u.demotedUntil.UTC()
		default:
			us.Breaker = device.BreakerProbing
		}
		s.Units = append(s.Units, us)
	}
	d.mu.Unlock()
	slices.SortFunc(s.Units, func(a, b device.UnitStats) int { return a.Unit - b.Unit })
	return s
}
