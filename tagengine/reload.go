package tagengine

import (
	"context"
	"errors"
	"fmt"

	"qubiq.dev/edge/device"
)

// TakeOver makes e the successor of old when the project is reloaded
// without restarting the daemon (docs/api.md, REST: POST /project/import).
// Call it after old.Stop returned and before e.Start.
//
//   - Subscribers of old become subscribers of e: their channels, dropped
//     counters and cancel functions keep working (history recording, the
//     LiveView WebSocket). A change old's drivers still push after this
//     call is not published.
//   - Every tag of e that old has with the same source (device name,
//     address, type, byte order, unit id and scale) on a device that
//     keepDevice accepts (nil: every device) keeps its current VQT, quality
//     included, until its device answers the new engine; a seeded last
//     value stays Uncertain_LastUsableValue. A driver that holds values
//     itself (device.Restorer: the simulator's memory) gets the value back,
//     so a setpoint survives the reload.
//   - Other tags start as Bad_WaitingForInitialData. Tags old had and e
//     has not read as Bad_NodeIdUnknown from e.
//   - The counters (Counts: changes, scans, overruns, history skipped)
//     go on from old's: they count since the daemon's start, and a
//     counter exported as such (docs/metrics.md) must not fall back to
//     zero at an import.
func (e *Engine) TakeOver(old *Engine, keepDevice func(name string) bool) {
	old.retired.Store(true)
	e.subs = old.subs
	e.changes.Add(old.changes.Load())
	e.scans.Add(old.scans.Load())
	e.overruns.Add(old.overruns.Load())
	e.histSkipped.Add(old.histSkipped.Load())
	old.mu.RLock()
	defer old.mu.RUnlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	for path, st := range e.tags {
		prev, ok := old.tags[path]
		if !ok || !sameSource(prev.tag, st.tag) || (keepDevice != nil && !keepDevice(st.tag.Device)) {
			continue
		}
		if prev.cur.Value == nil && prev.cur.Quality == st.cur.Quality {
			continue // never read: nothing to carry
		}
		st.cur = prev.cur
		st.seeded = prev.seeded
		if prev.tag.History != nil && st.tag.History != nil && *prev.tag.History == *st.tag.History {
			*st.hist = *prev.hist // the same policy keeps its deadband state
		}
		if r, ok := e.devices[st.tag.Device].(device.Restorer); ok && prev.cur.Value != nil {
			raw, err := st.tag.Scale.ToRaw(prev.cur.Value, st.tag.Point.Type)
			if err == nil {
				r.Restore(st.tag.Point, raw)
			}
		}
	}
}

// sameSource reports whether a and b read the same value from the same
// place: same device, point (address, type, byte order, unit id) and scale.
// Deadband, scan class, write level, units and description may differ.
func sameSource(a, b Tag) bool {
	return a.Device == b.Device && a.Point == b.Point && a.Scale == b.Scale
}

// ErrNotBrowsable is wrapped by Browse when the device's driver has no
// address space to browse (it does not implement device.Browser).
var ErrNotBrowsable = errors.New("driver cannot browse")

// Browse returns the children of node in the named device's address space
// through its driver (device.Browser; OPC UA Part 4 §5.8.2); node "" is the
// driver's root (the Objects folder for OPC UA). An unknown device wraps
// ErrUnknownDevice, a driver that cannot browse ErrNotBrowsable; a driver
// error (not connected, unknown node) is returned as the driver gave it,
// usually a *device.QualityError.
func (e *Engine) Browse(ctx context.Context, name, node string) ([]device.BrowseResult, error) {
	drv, ok := e.devices[name]
	if !ok {
		return nil, fmt.Errorf("device %q: %w", name, ErrUnknownDevice)
	}
	b, ok := drv.(device.Browser)
	if !ok {
		return nil, fmt.Errorf("device %q: %w", name, ErrNotBrowsable)
	}
	res, err := b.Browse(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("device %q: browse %q: %w", name, node, err)
	}
	return res, nil
}
