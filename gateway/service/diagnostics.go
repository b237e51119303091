package service

import (
	"context"

	"qubiq.dev/edge/gateway"
)

// Figures returns every part's figures for the metrics
// (gateway.Diagnostics): the devices with their statistics, the tag
// engine, history, the sandbox, the audit log and the alarms.
func (s *Service) Figures(ctx context.Context) gateway.Figures {
	c := s.Engine().Counts()
	f := gateway.Figures{Devices: s.ListDevices(ctx), Engine: gateway.EngineFigures{Tags: c.Tags, Changes: c.Changes,
		Scans: c.Scans, Overruns: c.Overruns, HistorySkipped: c.HistSkipped}}
	if s.data != nil && s.data.history != nil {
		h := s.data.history.Stats()
		f.History = &gateway.HistoryFigures{Queue: h.Queue, Journal: h.Journal, Bytes: h.Bytes, Offered: h.Offered,
			Dropped: h.Dropped, Rejected: h.Rejected, Committed: h.Committed, Commits: h.Commits,
			CommitFailures: h.CommitFailures, RetentionRuns: h.RetentionRuns, RetentionFailures: h.RetentionFailures}
	}
	if s.pool != nil {
		p := s.pool.Stats()
		f.Sandbox = &gateway.SandboxFigures{Runs: p.Runs, Restarts: p.Restarts, Timeouts: p.Timeouts, OOMs: p.OOMs,
			Workers: p.Workers, Live: p.Live, Busy: p.Busy, Queued: p.Queued, Memory: p.Memory}
	}
	if s.audit != nil {
		a := s.audit.Stats()
		f.Audit = &gateway.AuditFigures{Enqueued: a.Enqueued, Committed: a.Committed, Refused: a.Refused,
			CommitFailures: a.CommitFailures}
	}
	if s.alarms != nil {
		m := s.AlarmMetrics(ctx)
		f.Alarms = &m
	}
	return f
}
