package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// Every change the service makes and every refusal it decides is audited
// once (README: Audit): the helpers below are the one way records are
// made. A change whose record could not be queued is refused before it is
// made (canAudit).

// scriptOf returns the script of an origin "script:module.entry".
func scriptOf(origin string) (string, bool) {
	s, ok := strings.CutPrefix(origin, "script:")
	return s, ok && s != ""
}

// record builds the audit record of an action by g.
func record(g auth.Grant, action, target, result, detail string) store.AuditRecord {
	rec := store.AuditRecord{Time: time.Now().UTC(), Principal: g.Principal, Realm: string(g.Realm), Origin: g.Origin,
		Action: action, Target: target, Result: result, Detail: detail}
	if s, ok := scriptOf(g.Origin); ok {
		rec.Script = s
	}
	return rec
}

// enqueue queues rec; a record that cannot be queued is logged as lost.
func (s *Service) enqueue(rec store.AuditRecord) {
	if s.audit == nil {
		return
	}
	if err := s.audit.Enqueue(rec); err != nil {
		s.log.Error("audit record lost", slog.String("action", rec.Action), slog.String("target", rec.Target), slog.Any("err", err))
	}
}

// auditAdmin records an administrative change by g, with detail as JSON.
func (s *Service) auditAdmin(g auth.Grant, action, target string, detail any) {
	rec := record(g, action, target, "ok", "")
	if detail != nil {
		if b, err := json.Marshal(detail); err == nil {
			rec.After = b
		}
	}
	s.enqueue(rec)
}

// auditResult records an action by g with its result and detail.
func (s *Service) auditResult(g auth.Grant, action, target, result, detail string) {
	s.enqueue(record(g, action, target, result, detail))
}

// canAudit refuses a change whose audit record could not be queued: the
// queue nearly full, or the disk failing (README: Audit, fail closed). The
// error wraps gateway.ErrUnavailable.
func (s *Service) canAudit() error {
	if s.audit == nil {
		return nil
	}
	st := s.audit.Stats()
	pending := st.Enqueued - st.Committed
	if pending >= uint64(store.DefaultAuditOptions.Queue)*9/10 {
		return unavailable(fmt.Sprintf("audit queue nearly full (%d pending)", pending))
	}
	if st.LastError != nil && pending > 0 {
		return unavailable("audit log cannot commit: " + st.LastError.Error())
	}
	return nil
}

// unavailable is an error that says msg and is gateway.ErrUnavailable
// (errors.Is), without that sentinel's text.
type unavailable string

func (e unavailable) Error() string { return string(e) }
func (e unavailable) Unwrap() error { return gateway.ErrUnavailable }

// CanAudit reports (nil) whether an audit record can be queued now
// (gateway.Audit).
func (s *Service) CanAudit() error { return s.canAudit() }

// Audit queues one record of a front door's action (gateway.Audit).
func (s *Service) Audit(_ context.Context, g auth.Grant, ev gateway.AuditEvent) error {
	rec := record(g, ev.Action, ev.Target, ev.Result, ev.Detail)
	if ev.After != nil {
		b, err := json.Marshal(ev.After)
		if err != nil {
			return fmt.Errorf("audit %s: %w", ev.Action, err)
		}
		rec.After = b
	}
	if s.audit == nil {
		return fmt.Errorf("%w: no audit log", gateway.ErrUnavailable)
	}
	return s.audit.Enqueue(rec)
}

// AuditRefusal records a refusal a front door or the sandbox dispatcher
// decided (gateway.Audit).
func (s *Service) AuditRefusal(_ context.Context, g auth.Grant, target string, reason error) {
	s.enqueue(record(g, "refused", target, "refused", reason.Error()))
}

// AuditRecords lists the audit log in commit order, the records q
// matches, after committing the queued ones (gateway.Audit).
func (s *Service) AuditRecords(ctx context.Context, after uint64, limit int, q gateway.AuditQuery) ([]gateway.AuditRecord, error) {
	if s.audit != nil { // the records still queued first, so an action's record is listed right after it
		if err := s.audit.Flush(ctx); err != nil {
			s.log.Warn("audit flush before an audit listing failed", slog.Any("err", err))
		}
	}
	q.Before, q.Limit = 0, 0
	var match func(store.AuditRecord) bool
	if q != (gateway.AuditQuery{}) {
		match = func(r store.AuditRecord) bool { return q.Matches(gatewayRecords([]store.AuditRecord{r})[0]) }
	}
	recs, err := s.db.AuditRecordsWhere(after, limit, match)
	if err != nil {
		return nil, err
	}
	return gatewayRecords(recs), nil
}

// trailScan bounds how many of the newest audit records AuditTrail looks
// through.
const trailScan = 20000

// AuditTrail returns the newest records of one origin, newest first
// (gateway.Audit): the records still queued are committed first, so an
// action's record shows in the list fetched right after it.
func (s *Service) AuditTrail(ctx context.Context, origin string, limit int) ([]gateway.AuditRecord, error) {
	if s.audit != nil {
		if err := s.audit.Flush(ctx); err != nil {
			s.log.Warn("audit flush before an audit trail failed", slog.Any("err", err))
		}
	}
	recs, err := s.db.RecentAuditRecords(limit, trailScan, func(r store.AuditRecord) bool { return r.Origin == origin })
	if err != nil {
		return nil, err
	}
	return gatewayRecords(recs), nil
}

func gatewayRecords(recs []store.AuditRecord) []gateway.AuditRecord {
	out := make([]gateway.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = gateway.AuditRecord{Seq: r.Seq, Time: r.Time, Principal: r.Principal, Realm: r.Realm, Origin: r.Origin,
			Script: r.Script, Action: r.Action, Target: r.Target, Before: r.Before, After: r.After, Result: r.Result, Detail: r.Detail}
	}
	return out
}

// engineAudit is the tag engine's audit sink (tagengine.AuditSink and
// AuditSyncer) over the store's group-committed log: a write to equipment
// is refused while a record cannot be queued, and answered only once its
// record is committed.
type engineAudit struct{ s *Service }

// CanAudit reports whether a record can be queued now.
func (a engineAudit) CanAudit() error { return a.s.canAudit() }

// SyncAudit waits (at most 5 s) until the records queued so far are
// committed.
func (a engineAudit) SyncAudit(ctx context.Context) error {
	if a.s.audit == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return a.s.audit.Flush(ctx)
}

// Audit queues the record of one write.
func (a engineAudit) Audit(ev tagengine.AuditEvent) error {
	rec := record(ev.Grant, ev.Action, ev.Target, ev.Result, ev.Detail)
	rec.Time = ev.Time
	if ev.Before != nil {
		rec.Before = vqtJSON(*ev.Before)
	}
	if ev.After != nil {
		if b, err := json.Marshal(ev.After); err == nil {
			rec.After = b
		}
	}
	if a.s.audit == nil {
		return nil
	}
	return a.s.audit.Enqueue(rec)
}

var (
	_ tagengine.AuditSink   = engineAudit{}
	_ tagengine.AuditSyncer = engineAudit{}
)

// vqtJSON is a VQT as audit records hold it ("before"): the REST form of a
// tag value, without a path.
func vqtJSON(v value.VQT) json.RawMessage {
	b, err := json.Marshal(rowOf("", v))
	if err != nil {
		return nil
	}
	return b
}
