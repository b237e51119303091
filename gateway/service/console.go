package service

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
)

// What the engineer's console reads beyond the other groups
// (gateway.ScriptCodes, gateway.AuditSearcher; docs/console.md).

// ScriptCode returns a stored version of a module with its source
// (gateway.ScriptCodes): version 0 is the latest.
func (s *Service) ScriptCode(_ context.Context, _ auth.Grant, module string, version int64) (gateway.ScriptCode, error) {
	if err := gateway.CheckName("module", module); err != nil {
		return gateway.ScriptCode{}, err
	}
	if version < 0 || version > math.MaxInt32 {
		return gateway.ScriptCode{}, fmt.Errorf("%w: version %d: want a version number from 1, or 0 for the latest", gateway.ErrInvalid, version)
	}
	var (
		sc  store.Script
		err error
	)
	if version == 0 {
		sc, err = s.db.Script(module)
	} else {
		sc, err = s.db.ScriptVersion(module, int(version))
	}
	if err != nil {
		return gateway.ScriptCode{}, s.scriptErr(module, int(version), err)
	}
	return gateway.ScriptCode{Module: sc.Module, Version: int64(sc.Version), Saved: sc.Saved.UTC(), Code: sc.Code}, nil
}

// SearchAudit returns the newest audit records matching q
// (gateway.AuditSearcher), after committing those still queued.
func (s *Service) SearchAudit(ctx context.Context, q gateway.AuditQuery) ([]gateway.AuditRecord, error) {
	switch {
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit < 0 || q.Limit > gateway.MaxAuditSearch:
		return nil, fmt.Errorf("%w: limit %d: want 1 to %d", gateway.ErrInvalid, q.Limit, gateway.MaxAuditSearch)
	}
	if s.audit != nil {
		if err := s.audit.Flush(ctx); err != nil {
			s.log.Warn("audit flush before an audit search failed", slog.Any("err", err))
		}
	}
	recs, err := s.db.RecentAuditRecords(q.Limit, gateway.AuditSearchScan, func(r store.AuditRecord) bool {
		return q.Matches(gateway.AuditRecord{Seq: r.Seq, Time: r.Time, Principal: r.Principal, Origin: r.Origin,
			Action: r.Action, Result: r.Result})
	})
	if err != nil {
		return nil, err
	}
	return gatewayRecords(recs), nil
}
