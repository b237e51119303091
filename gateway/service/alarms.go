package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/alarm"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

// Alarm management under a grant (gateway.Alarms), delegating to package
// alarm: the service checks the scopes, audits every operation, converts
// the types; alarm checks each alarm's level and keeps the state.

// alarmTags is what alarm.Parse needs of the project's tags.
func alarmTags(p *config.Project) map[string]alarm.TagInfo {
	out := make(map[string]alarm.TagInfo, len(p.Tags))
	for _, tc := range p.Tags {
		typ := value.Float64
		if pt, err := config.TagPoint(tc); err == nil {
			typ = pt.Type
		}
		out[tc.Path] = alarm.TagInfo{Type: typ, Units: tc.Units}
	}
	return out
}

// parseAlarms parses the project's alarms: section; every problem names
// the file and line.
func parseAlarms(p *config.Project) ([]alarm.Instance, error) {
	return alarm.Parse(p.File, p.Alarms, alarmTags(p))
}

// checkAlarms is the alarms' part of CheckProject.
func checkAlarms(p *config.Project) error {
	_, err := parseAlarms(p)
	return err
}

// buildAlarms builds the alarm engine of the running project, restoring
// the alarms' persisted states.
func (s *Service) buildAlarms() error {
	p := s.Project()
	insts, err := parseAlarms(p)
	if err != nil {
		return err
	}
	dropAlarmNodes(p)
	s.alarms, err = alarm.New(alarm.Options{Settings: s.opts.Alarms, Journal: s.db, Source: alarmSource{s},
		Log: s.log.With("subsystem", "alarms")}, insts)
	return err
}

// applyAlarms applies an imported project's alarms (checked already),
// before p becomes the running project.
func (s *Service) applyAlarms(p *config.Project) {
	insts, err := parseAlarms(p)
	if err != nil {
		s.log.Error("project import: alarms", slog.Any("err", err))
		return
	}
	dropAlarmNodes(p)
	s.alarms.SetDefinitions(insts)
}

// dropAlarmNodes lets go of the YAML nodes of p's alarms: section once the
// alarm engine holds the definitions (about 2 KB per alarm; nothing else
// reads them: export and diffs work from the stored document and the other
// sections). Call it only while p is not yet shared.
func dropAlarmNodes(p *config.Project) { p.Alarms = nil }

// alarmSource is the tag engine as the alarms' Source. Its subscription is
// the tag engine's own (it outlives project imports), forwarded by a
// goroutine that waits for the alarm engine rather than drop: the only
// place a change can be lost is the tag engine's bounded fan-out, which
// counts it, and the alarm engine re-evaluates from current values when
// that count rises (package alarm, Engine).
type alarmSource struct{ s *Service }

// alarmGrant is the grant the alarm engine reads tags with.
var alarmGrant = auth.Grant{Principal: "alarms", Realm: auth.RealmPlatform, Origin: "alarms", Scopes: []auth.Scope{auth.TagRead}}

func (a alarmSource) Subscribe(buf int, want func(path string) bool) (<-chan alarm.Change, func() uint64, func()) {
	in, dropped, unsubscribe := a.s.Engine().SubscribeFunc(buf, want)
	out := make(chan alarm.Change, 64) // the engine's subscription holds what waits (buf)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case c := <-in:
				select {
				case out <- alarm.Change{Path: c.Path, VQT: c.VQT}:
				case <-stop:
					return
				}
			}
		}
	}()
	var once sync.Once
	return out, dropped, func() {
		once.Do(func() {
			unsubscribe()
			close(stop)
		})
	}
}

func (a alarmSource) Read(paths []string) []value.VQT {
	res, err := a.s.Engine().Read(alarmGrant, paths)
	out := make([]value.VQT, len(paths))
	for i := range paths {
		if err != nil || i >= len(res) {
			out[i] = value.Bad(value.BadConfigurationError, fmt.Sprint("alarm read: ", err), time.Now())
			continue
		}
		out[i] = res[i].VQT
	}
	return out
}

// alarmErr maps the alarm package's errors onto the gateway's.
func alarmErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, alarm.ErrInvalid):
		return fmt.Errorf("%w: %s", gateway.ErrInvalid, strings.TrimPrefix(err.Error(), alarm.ErrInvalid.Error()+": "))
	case errors.Is(err, alarm.ErrNotFound):
		return fmt.Errorf("%w: %s", gateway.ErrNotFound, err.Error())
	case errors.Is(err, alarm.ErrUnavailable):
		return fmt.Errorf("%w: %s", gateway.ErrUnavailable, err.Error())
	}
	return err
}

func gatewayAlarm(a alarm.Alarm) gateway.Alarm {
	out := gateway.Alarm{ID: a.ID, Name: a.Name, Source: a.Source, DisplayPath: a.DisplayPath, Priority: a.Priority.String(),
		Mode: a.Mode.String(), AckMode: a.AckMode.String(), State: a.State.String(), Active: a.Active, Acked: a.Acked,
		Suppressed: a.Suppressed, OutOfService: a.OutOfService, Latched: a.Latched, Chattering: a.Chattering,
		Evaluable: a.Evaluable, Reason: a.Reason, Message: a.Message, Value: a.Value, Units: a.Units, Quality: a.Quality,
		Timestamp: a.Timestamp, Setpoint: a.Setpoint, Low: a.Low, High: a.High, ActiveSince: a.ActiveSince, AckedAt: a.AckedAt, AckedBy: a.AckedBy,
		LastChange: a.LastChange, AckLevel: a.AckLevel, ShelveLevel: a.ShelveLevel, Notes: make([]gateway.AlarmNote, len(a.Notes))}
	if a.Shelf != nil {
		out.Shelf = &gateway.AlarmShelf{By: a.Shelf.By, At: a.Shelf.At, Until: a.Shelf.Until, OneShot: a.Shelf.OneShot}
	}
	for i, n := range a.Notes {
		out.Notes[i] = gateway.AlarmNote{By: n.By, At: n.At, Text: n.Text}
	}
	return out
}

func summaryOf(s alarm.Summary) gateway.AlarmSummary {
	return gateway.AlarmSummary{Unacked: s.Unacked, Active: s.Active, Highest: s.Highest.String()}
}

// ListAlarms lists the alarms g may read (gateway.Alarms).
func (s *Service) ListAlarms(_ context.Context, g auth.Grant, f gateway.AlarmFilter) (gateway.AlarmList, error) {
	if err := g.RequireScope(auth.AlarmRead, "alarms"); err != nil {
		return gateway.AlarmList{}, err
	}
	af := alarm.Filter{Prefix: f.Prefix, IncludeNormal: f.IncludeNormal, Allow: g.AllowsPath}
	for _, st := range f.States {
		x, ok := alarm.ParseState(st)
		if !ok {
			return gateway.AlarmList{}, fmt.Errorf("%w: unknown state %q (want normal, active_unacked, active_acked or rtn_unacked)", gateway.ErrInvalid, st)
		}
		af.States = append(af.States, x)
	}
	for _, p := range f.Priorities {
		x, err := alarm.ParsePriority(p)
		if err != nil {
			return gateway.AlarmList{}, fmt.Errorf("%w: %v", gateway.ErrInvalid, err)
		}
		af.Priorities = append(af.Priorities, x)
	}
	list, sum := s.alarms.List(af)
	out := gateway.AlarmList{Alarms: make([]gateway.Alarm, len(list)), Unacked: sum.Unacked, Active: sum.Active, Highest: sum.Highest.String()}
	for i, a := range list {
		out.Alarms[i] = gatewayAlarm(a)
	}
	return out, nil
}

// AlarmSummary returns the banner's counts for g (gateway.Alarms).
func (s *Service) AlarmSummary(_ context.Context, g auth.Grant) (gateway.AlarmSummary, error) {
	if err := g.RequireScope(auth.AlarmRead, "alarms"); err != nil {
		return gateway.AlarmSummary{}, err
	}
	return summaryOf(s.alarms.Summary(g.AllowsPath)), nil
}

// AlarmJournal queries the journal (gateway.Alarms).
func (s *Service) AlarmJournal(_ context.Context, g auth.Grant, q gateway.AlarmJournalQuery) (gateway.AlarmJournalPage, error) {
	if err := g.RequireScope(auth.AlarmRead, "alarms/journal"); err != nil {
		return gateway.AlarmJournalPage{}, err
	}
	if q.Limit < 0 || q.Limit > store.MaxAlarmQueryLimit {
		return gateway.AlarmJournalPage{}, fmt.Errorf("%w: limit %d: want 1 to %d", gateway.ErrInvalid, q.Limit, store.MaxAlarmQueryLimit)
	}
	if q.State != "" {
		if _, ok := alarm.ParseState(q.State); !ok && q.State != alarm.StateShelved && q.State != alarm.StateSuppressed && q.State != alarm.StateOutOfService {
			return gateway.AlarmJournalPage{}, fmt.Errorf("%w: unknown state %q (want normal, active_unacked, active_acked, rtn_unacked, shelved, suppressed or out_of_service)", gateway.ErrInvalid, q.State)
		}
	}
	if q.Priority != "" {
		if _, err := alarm.ParsePriority(q.Priority); err != nil {
			return gateway.AlarmJournalPage{}, fmt.Errorf("%w: %v", gateway.ErrInvalid, err)
		}
	}
	es, next, err := s.alarms.Journal(store.AlarmQuery{From: q.From, To: q.To, Path: q.Path, Priority: q.Priority, State: q.State,
		After: q.After, Desc: q.Desc, Limit: q.Limit, Allow: g.AllowsPath})
	if err != nil {
		return gateway.AlarmJournalPage{}, err
	}
	out := gateway.AlarmJournalPage{Entries: make([]gateway.AlarmJournalEntry, len(es)), Next: next}
	for i, e := range es {
		out.Entries[i] = gateway.AlarmJournalEntry{Seq: e.Seq, At: e.At, ID: e.ID, Source: e.Source, Priority: e.Priority,
			Event: e.Event, From: e.From, To: e.To, Cause: e.Cause, By: e.By, Value: e.Value, Quality: e.Quality, Note: e.Note}
	}
	return out, nil
}

// AlarmStats returns the EEMUA 191 figures for g (gateway.Alarms).
func (s *Service) AlarmStats(_ context.Context, g auth.Grant, window time.Duration) (gateway.AlarmStats, error) {
	if err := g.RequireScope(auth.AlarmRead, "alarms/stats"); err != nil {
		return gateway.AlarmStats{}, err
	}
	st := s.alarms.Stats(window, g.AllowsPath)
	out := gateway.AlarmStats{Window: st.Window, From: st.From, To: st.To, Activations: st.Activations, RatePer10Min: st.RatePer10Min,
		RatePerHour: st.RatePerHour, Max10Min: st.Max10Min, Floods: st.Floods, FloodPercent: st.FloodPercent, Stale: st.Stale,
		Chattering: st.Chattering, ChatteringTotal: st.ChatteringTotal, Alarms: st.Alarms, Active: st.Active, Unacked: st.Unacked,
		Shelved: st.Shelved, Suppressed: st.Suppressed, OutOfService: st.OutOfService, NotEvaluable: st.NotEvaluable,
		Top: make([]gateway.AlarmCount, len(st.Top)), Intervals: make([]gateway.AlarmInterval, len(st.Intervals))}
	for i, c := range st.Top {
		out.Top[i] = gateway.AlarmCount{ID: c.ID, Count: c.Count}
	}
	for i, iv := range st.Intervals {
		out.Intervals[i] = gateway.AlarmInterval{Start: iv.Start, Count: iv.Count}
	}
	return out, nil
}

// maxAlarmIDs caps the ids of one operation.
const maxAlarmIDs = 10000

// alarmOp runs one operation on alarms for g: the scope, the id count and
// the audit log are checked first (nothing is done unless its record can
// be queued), then op, then one audit record of the call (action, the ids
// done and those refused with why).
func (s *Service) alarmOp(g auth.Grant, action string, ids []string, op func() ([]alarm.Result, error)) ([]gateway.AlarmResult, error) {
	if err := g.RequireScope(auth.AlarmAck, action); err != nil {
		return nil, err
	}
	if len(ids) > maxAlarmIDs {
		return nil, fmt.Errorf("%w: %d alarm ids in one call; at most %d", gateway.ErrInvalid, len(ids), maxAlarmIDs)
	}
	if err := s.canAudit(); err != nil {
		return nil, err
	}
	res, err := op()
	if err != nil {
		err = alarmErr(err)
		s.auditResult(g, action, targetOf(ids), gateway.Kind(err), err.Error())
		return nil, err
	}
	out := make([]gateway.AlarmResult, len(res))
	var done []string
	type refusal struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	var refused []refusal
	for i, r := range res {
		out[i] = gateway.AlarmResult{ID: r.ID, Status: r.Status, Reason: r.Reason}
		if r.Status.IsGood() {
			done = append(done, r.ID)
		} else {
			refused = append(refused, refusal{r.ID, r.Status.String(), r.Reason})
		}
	}
	result := "ok"
	detail := fmt.Sprintf("%d done", len(done))
	switch {
	case len(refused) > 0 && len(done) == 0:
		result = "refused"
	case len(refused) > 0:
		result = "partial"
	}
	if len(refused) > 0 {
		detail += fmt.Sprintf(", %d refused: %s: %s", len(refused), refused[0].ID, refused[0].Reason)
	}
	if len(refused) > maxAuditNames {
		refused = refused[:maxAuditNames]
	}
	if refused == nil {
		refused = []refusal{}
	}
	rec := record(g, action, targetOf(res2ids(res)), result, detail)
	if b, err := jsonOf(map[string]any{"ids": auditList(done), "refused": refused}); err == nil {
		rec.After = b
	}
	s.enqueue(rec)
	return out, nil
}

func res2ids(res []alarm.Result) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.ID
	}
	return out
}

// targetOf is an alarm operation's audit target: the one id, or "N alarms".
func targetOf(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	return fmt.Sprintf("%d alarms", len(ids))
}

// AckAlarms acknowledges alarms (gateway.Alarms).
func (s *Service) AckAlarms(_ context.Context, g auth.Grant, ids []string, all bool) ([]gateway.AlarmResult, error) {
	return s.alarmOp(g, "alarm.ack", ids, func() ([]alarm.Result, error) { return s.alarms.Ack(g, ids, all) })
}

// ShelveAlarms shelves alarms (gateway.Alarms).
func (s *Service) ShelveAlarms(_ context.Context, g auth.Grant, ids []string, d time.Duration, oneShot bool) ([]gateway.AlarmResult, error) {
	return s.alarmOp(g, "alarm.shelve", ids, func() ([]alarm.Result, error) { return s.alarms.Shelve(g, ids, d, oneShot) })
}

// UnshelveAlarms unshelves alarms (gateway.Alarms).
func (s *Service) UnshelveAlarms(_ context.Context, g auth.Grant, ids []string) ([]gateway.AlarmResult, error) {
	return s.alarmOp(g, "alarm.unshelve", ids, func() ([]alarm.Result, error) { return s.alarms.Unshelve(g, ids) })
}

// AddAlarmNote adds a note (gateway.Alarms).
func (s *Service) AddAlarmNote(_ context.Context, g auth.Grant, id, text string) error {
	if err := g.RequireScope(auth.AlarmAck, "alarm.note"); err != nil {
		return err
	}
	if err := s.canAudit(); err != nil {
		return err
	}
	err := alarmErr(s.alarms.AddNote(g, id, text))
	if err != nil {
		s.auditResult(g, "alarm.note", id, "refused", err.Error())
		return err
	}
	s.auditResult(g, "alarm.note", id, "ok", "")
	return nil
}

// SubscribeAlarms streams the transitions of the alarms g may read
// (gateway.Alarms).
func (s *Service) SubscribeAlarms(g auth.Grant, buf int) (<-chan gateway.AlarmEvent, func() uint64, func()) {
	in, engineDropped, unsubscribe := s.alarms.Subscribe(buf)
	out := make(chan gateway.AlarmEvent, max(buf, 1))
	stop := make(chan struct{})
	var lost atomic.Uint64
	go func() {
		for {
			select {
			case <-stop:
				return
			case t := <-in:
				if !g.HasScope(auth.AlarmRead) || !g.AllowsPath(t.Alarm.Source) {
					continue
				}
				ev := gateway.AlarmEvent{Seq: t.Seq, At: t.At, Event: t.Event, From: t.From, To: t.To, Cause: t.Cause,
					By: t.By, Note: t.Note, Value: t.Value, Quality: t.Quality, Alarm: gatewayAlarm(t.Alarm)}
				select {
				case out <- ev:
				default:
					lost.Add(1)
				}
			}
		}
	}()
	var once atomic.Bool
	return out, func() uint64 { return engineDropped() + lost.Load() }, func() {
		if once.CompareAndSwap(false, true) {
			unsubscribe()
			close(stop)
		}
	}
}

// AlarmMetrics returns the alarm figures for /metrics (gateway.Alarms).
func (s *Service) AlarmMetrics(context.Context) gateway.AlarmMetrics {
	m := s.alarms.Metrics()
	return gateway.AlarmMetrics{Alarms: m.Alarms, ByState: m.ByState, Shelved: m.Shelved, Suppressed: m.Suppressed,
		OutOfService: m.OutOfService, NotEvaluable: m.NotEvaluable, Chattering: m.Chattering, ActiveByPriority: m.ActiveByPriority,
		ActivationsTotal: m.ActivationsTotal, TransitionsTotal: m.TransitionsTotal, ChatteringTotal: m.ChatteringTotal,
		EvaluationsTotal: m.EvaluationsTotal, ChangesTotal: m.ChangesTotal, FeedDroppedTotal: m.FeedDroppedTotal,
		ResyncsTotal: m.ResyncsTotal, CommitErrorsTotal: m.CommitErrorsTotal, LostEntriesTotal: m.LostEntriesTotal,
		SubscriberDropTotal: m.SubscriberDropTotal, JournalEntries: m.JournalEntries, JournalBytes: m.JournalBytes,
		RatePer10Min: m.RatePer10Min, Floods24h: m.Floods24h}
}
