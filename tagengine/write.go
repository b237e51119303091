package tagengine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// WriteLevels resolves the tags' write levels from the configuration: an
// unknown tag resolves to the baseline (docs/security.md, "Write levels"). It never fails; it is the
// LevelSource used when Config.Levels is nil.
func (e *Engine) WriteLevels(_ context.Context, paths []string) (map[string]auth.Level, error) {
	out := make(map[string]auth.Level, len(paths))
	for _, p := range paths {
		if st, ok := e.lookup(p); ok {
			out[p] = st.level
		} else {
			out[p] = e.cfg.Baseline
		}
	}
	return out, nil
}

// Write is the write path (docs/architecture.md, "Writes flow one way"): it checks that
// g holds tag:write (else a *auth.DeniedError, nothing written), resolves the
// write level of every target (an error refuses the whole batch with
// ErrLevelLookup, nothing written), then per tag: known, inside g's prefixes,
// level allowed, not read-only, value of the right type and range, audit
// record queueable; only then does the driver get the write. Each write is
// independent: one refused tag never stops the others. Every write that
// reached a device and every refusal is audited.
func (e *Engine) Write(ctx context.Context, g auth.Grant, reqs []WriteRequest) ([]WriteResult, error) {
	if err := g.RequireScope(auth.TagWrite, "tag.write"); err != nil {
		e.audit(g, "tag.write.refused", "", nil, nil, value.BadUserAccessDenied.String(), err.Error())
		return nil, err
	}
	paths := make([]string, len(reqs))
	for i, r := range reqs {
		paths[i] = r.Path
	}
	src := e.cfg.Levels
	if src == nil {
		src = e
	}
	levels, err := src.WriteLevels(ctx, paths)
	if err != nil {
		e.audit(g, "tag.write.refused", "", nil, nil, "refused", "write level lookup failed: "+err.Error())
		return nil, fmt.Errorf("%w: %v", ErrLevelLookup, err)
	}
	out := make([]WriteResult, len(reqs))
	var reached, held bool
	for i, r := range reqs {
		var res writeOutcome
		out[i], res = e.writeOne(ctx, g, r, levels)
		reached = reached || res.reached
		held = held || res.held
	}
	if reached {
		// The answer goes out only after the audit records of the writes
		// are committed, so a power cut cannot lose the record of an
		// acknowledged write.
		if s, ok := e.cfg.Audit.(AuditSyncer); ok {
			if err := s.SyncAudit(ctx); err != nil {
				e.log.Error("audit records of equipment writes not committed", "err", err)
			}
		}
	}
	if held {
		// Values the driver holds itself (simulator memory) are persisted
		// now, not at the next periodic flush, so a crash right after the
		// answer does not revert them.
		if err := e.flush(); err != nil {
			e.log.Error("persist written values failed", "err", err)
		}
	}
	return out, nil
}

// AuditSyncer is implemented by audit sinks that can wait until the records
// queued so far are committed; Write calls it before answering a batch
// whose writes reached equipment.
type AuditSyncer interface {
	SyncAudit(ctx context.Context) error
}

type writeOutcome struct {
	reached bool // the driver got the write
	held    bool // the driver holds the value itself (device.Restorer) and took it
}

func (e *Engine) writeOne(ctx context.Context, g auth.Grant, r WriteRequest, levels map[string]auth.Level) (WriteResult, writeOutcome) {
	res := WriteResult{Path: r.Path}
	refuse := func(q value.Quality, reason string, before *value.VQT) (WriteResult, writeOutcome) {
		res.Quality, res.Reason = q, reason
		e.audit(g, "tag.write.refused", r.Path, before, r.Value, q.String(), reason)
		return res, writeOutcome{}
	}
	if outsidePrefixes(g, r.Path) { // before the lookup: no answer tells whether it exists
		return refuse(value.BadUserAccessDenied, reasonOutsidePrefixes, nil)
	}
	st, ok := e.lookup(r.Path)
	if !ok {
		return refuse(value.BadNodeIDUnknown, "unknown tag", nil)
	}
	lvl, ok := levels[r.Path]
	if !ok {
		lvl = e.cfg.Baseline
	}
	if !g.AllowsLevel(lvl) {
		return refuse(value.BadUserAccessDenied, fmt.Sprintf("write level %q required (grant has %q)", lvl, g.WriteLevel), nil)
	}
	if st.tag.ReadOnly {
		return refuse(value.BadNotWritable, "tag is read-only", nil)
	}
	// The tag's engineering limits (min, max), then the one coercion of
	// the write path (device.Coerce): the driver gets the value in its
	// tag's type and does not coerce it again.
	eng := value.Normalize(r.Value)
	if err := st.tag.CheckLimits(eng); err != nil {
		return refuse(value.BadOutOfRange, err.Error(), nil)
	}
	raw, err := st.tag.Scale.ToRaw(eng, st.tag.Point.Type)
	if err == nil {
		var scaled value.Value = raw
		raw, err = device.Coerce(st.tag.Point, raw)
		var qe *device.QualityError
		if errors.As(err, &qe) && qe.Quality == value.BadOutOfRange && !st.tag.Scale.identity() {
			// A scaled write whose raw value the register cannot hold:
			// say which raw value and the type's range.
			return refuse(value.BadOutOfRange, fmt.Sprintf("out of range: %v scales to the raw value %v, outside the %s range (%s)",
				eng, scaled, st.tag.Point.Type, value.RangeText(st.tag.Point.Type)), nil)
		}
	}
	if err != nil {
		if qe := (*device.QualityError)(nil); errors.As(err, &qe) {
			return refuse(qe.Quality, qe.Reason, nil)
		}
		return refuse(value.CoerceQuality(err), err.Error(), nil) // the scale's refusal
	}
	if what := value.NonFinite(raw); what != "" && !st.tag.PassNonFinite {
		return refuse(value.BadOutOfRange, what+" is not a finite number (tag option non_finite: pass allows it)", nil)
	}
	if e.cfg.Audit != nil {
		if err := e.cfg.Audit.CanAudit(); err != nil {
			res.Quality, res.Reason = value.BadDeviceFailure, "write refused: audit log unavailable: "+err.Error()
			e.log.Error("equipment write refused: audit record cannot be queued")
			return res, writeOutcome{}
		}
	}
	e.mu.RLock()
	before := st.cur
	e.mu.RUnlock()
	wctx, cancel := context.WithTimeout(ctx, e.cfg.WriteTimeout)
	drv := e.devices[st.tag.Device]
	werr := drv.Write(wctx, st.tag.Point, raw)
	cancel()
	out := writeOutcome{reached: true}
	if werr != nil {
		res.Quality, res.Reason = device.QualityOf(werr)
	} else {
		res.Quality = value.Good
		if _, ok := drv.(device.Restorer); ok {
			e.mu.Lock()
			st.written = e.writeGen.Add(1)
			if c, changed := e.update(st, value.VQT{Value: raw, Quality: value.Good, Time: time.Now().UTC()}); changed {
				e.mu.Unlock()
				e.publish([]Change{c})
			} else {
				e.mu.Unlock()
			}
			out.held = true
		}
		e.kick(st)
	}
	e.audit(g, "tag.write", r.Path, &before, r.Value, res.Quality.String(), res.Reason)
	return res, out
}

// kick asks the scan loop that holds st to read again now, so a written value
// shows without waiting a full scan period.
func (e *Engine) kick(st *tagState) {
	select {
	case st.grp.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) audit(g auth.Grant, action, target string, before *value.VQT, after value.Value, result, detail string) {
	if e.cfg.Audit == nil {
		return
	}
	ev := AuditEvent{Time: time.Now().UTC(), Grant: g, Action: action, Target: target,
		Before: before, After: after, Result: result, Detail: detail}
	if err := e.cfg.Audit.Audit(ev); err != nil {
		e.log.Error("audit record lost", "action", action, "target", target, "err", err)
	}
}
