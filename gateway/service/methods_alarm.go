package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/value"
)

// The system.alarm.* methods (sandbox/METHODS.md, "alarms"): each is one
// call of gateway.Alarms, so a script passes the same checks and audit as
// REST and LiveView.

func init() {
	methods["alarm.queryStatus"] = func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		var f gateway.AlarmFilter
		var err error
		if f.States, err = strOrList(a, "state"); err != nil {
			return nil, err
		}
		if f.Priorities, err = strOrList(a, "priority"); err != nil {
			return nil, err
		}
		if f.Prefix, err = a.String("prefix", false); err != nil {
			return nil, err
		}
		if a.Has("includeNormal") {
			if err := json.Unmarshal(a.Raw("includeNormal"), &f.IncludeNormal); err != nil {
				return nil, fmt.Errorf("system.alarm.queryStatus: includeNormal must be a bool: %w", sandbox.ErrBadArgs)
			}
		}
		list, err := s.ListAlarms(ctx, g, f)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]any, len(list.Alarms))
		for i, al := range list.Alarms {
			out[i] = scriptAlarm(al)
		}
		return json.Marshal(out)
	}
	methods["alarm.queryJournal"] = func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		var q gateway.AlarmJournalQuery
		var err error
		if a.Has("start") {
			if q.From, err = a.Time("start"); err != nil {
				return nil, err
			}
		}
		if a.Has("end") {
			if q.To, err = a.Time("end"); err != nil {
				return nil, err
			}
		}
		if q.Path, err = a.String("path", false); err != nil {
			return nil, err
		}
		if q.Priority, err = a.String("priority", false); err != nil {
			return nil, err
		}
		if q.State, err = a.String("state", false); err != nil {
			return nil, err
		}
		limit, err := a.Int("limit", 100)
		if err != nil {
			return nil, err
		}
		after, err := a.Int("after", 0)
		if err != nil || after < 0 {
			return nil, fmt.Errorf("system.alarm.queryJournal: after must be a sequence number: %w", sandbox.ErrBadArgs)
		}
		q.Limit, q.After = int(limit), uint64(after)
		page, err := s.AlarmJournal(ctx, g, q)
		if err != nil {
			return nil, err
		}
		entries := make([]map[string]any, len(page.Entries))
		for i, e := range page.Entries {
			entries[i] = scriptEntry(e)
		}
		var next any
		if page.Next != 0 {
			next = page.Next
		}
		return json.Marshal(map[string]any{"entries": entries, "next": next})
	}
	methods["alarm.acknowledge"] = func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		ids, err := idList(a, false)
		if err != nil {
			return nil, err
		}
		var all bool
		if a.Has("all") {
			if err := json.Unmarshal(a.Raw("all"), &all); err != nil {
				return nil, fmt.Errorf("system.alarm.acknowledge: all must be a bool: %w", sandbox.ErrBadArgs)
			}
		}
		if len(ids) == 0 && !all {
			return nil, fmt.Errorf("system.alarm.acknowledge: give ids, or all=True: %w", sandbox.ErrBadArgs)
		}
		return scriptResults(s.AckAlarms(ctx, g, ids, all))
	}
	methods["alarm.shelve"] = func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		ids, err := idList(a, true)
		if err != nil {
			return nil, err
		}
		var secs float64
		if a.Has("seconds") {
			if err := json.Unmarshal(a.Raw("seconds"), &secs); err != nil {
				return nil, fmt.Errorf("system.alarm.shelve: seconds must be a number: %w", sandbox.ErrBadArgs)
			}
		}
		var oneShot bool
		if a.Has("oneShot") {
			if err := json.Unmarshal(a.Raw("oneShot"), &oneShot); err != nil {
				return nil, fmt.Errorf("system.alarm.shelve: oneShot must be a bool: %w", sandbox.ErrBadArgs)
			}
		}
		return scriptResults(s.ShelveAlarms(ctx, g, ids, time.Duration(secs*float64(time.Second)), oneShot))
	}
	methods["alarm.unshelve"] = func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		ids, err := idList(a, true)
		if err != nil {
			return nil, err
		}
		return scriptResults(s.UnshelveAlarms(ctx, g, ids))
	}
	methods["alarm.addNote"] = func(ctx context.Context, s *Service, g auth.Grant, a sandbox.Args) (json.RawMessage, error) {
		id, err := a.String("id", true)
		if err != nil {
			return nil, err
		}
		text, err := a.String("text", true)
		if err != nil {
			return nil, err
		}
		if err := s.AddAlarmNote(ctx, g, id, text); err != nil {
			return nil, err
		}
		return json.RawMessage("null"), nil
	}
}

// strOrList reads argument k as one string or a list of strings.
func strOrList(a sandbox.Args, k string) ([]string, error) {
	if !a.Has(k) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(a.Raw(k), &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(a.Raw(k), &many); err != nil {
		return nil, fmt.Errorf("system.alarm: %s must be a str or a list of str: %w", k, sandbox.ErrBadArgs)
	}
	return many, nil
}

// idList reads the ids argument: a list of alarm ids.
func idList(a sandbox.Args, required bool) ([]string, error) {
	if !a.Has("ids") {
		if required {
			return nil, fmt.Errorf("system.alarm: missing argument \"ids\": %w", sandbox.ErrBadArgs)
		}
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal(a.Raw("ids"), &ids); err != nil {
		return nil, fmt.Errorf("system.alarm: ids must be a list of alarm ids: %w", sandbox.ErrBadArgs)
	}
	return ids, nil
}

// scriptTime is t as the tagged {"$dt"} a script reads as a datetime;
// null when zero.
func scriptTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return map[string]string{"$dt": t.UTC().Format("2006-01-02T15:04:05.000000Z")}
}

// scriptValue is a tag value as JSON (integers exact); null when it does
// not encode.
func scriptValue(v value.Value) json.RawMessage {
	b, err := value.EncodeJSON(v)
	if err != nil || b == nil {
		return json.RawMessage("null")
	}
	return b
}

// scriptAlarm is an alarm in the REST object's shape, times tagged.
func scriptAlarm(a gateway.Alarm) map[string]any {
	var shelf any
	if a.Shelf != nil {
		shelf = map[string]any{"by": a.Shelf.By, "until": scriptTime(a.Shelf.Until), "one_shot": a.Shelf.OneShot, "at": scriptTime(a.Shelf.At)}
	}
	notes := make([]map[string]any, len(a.Notes))
	for i, n := range a.Notes {
		notes[i] = map[string]any{"by": n.By, "at": scriptTime(n.At), "text": n.Text}
	}
	var ackedBy any
	if a.AckedBy != "" {
		ackedBy = a.AckedBy
	}
	return map[string]any{"id": a.ID, "name": a.Name, "source": a.Source, "display_path": a.DisplayPath, "priority": a.Priority,
		"mode": a.Mode, "ack_mode": a.AckMode, "state": a.State, "active": a.Active, "acked": a.Acked, "shelved": shelf,
		"suppressed": a.Suppressed, "out_of_service": a.OutOfService, "latched": a.Latched, "chattering": a.Chattering,
		"evaluable": a.Evaluable, "reason": a.Reason, "message": a.Message, "value": scriptValue(a.Value), "units": a.Units,
		"quality": a.Quality.String(), "timestamp": scriptTime(a.Timestamp), "setpoint": a.Setpoint, "low": a.Low, "high": a.High,
		"active_since": scriptTime(a.ActiveSince), "acked_at": scriptTime(a.AckedAt), "acked_by": ackedBy,
		"last_change": scriptTime(a.LastChange), "ack_level": a.AckLevel.String(), "shelve_level": a.ShelveLevel.String(),
		"notes": notes}
}

// scriptEntry is a journal entry for a script.
func scriptEntry(e gateway.AlarmJournalEntry) map[string]any {
	m := map[string]any{"seq": e.Seq, "at": scriptTime(e.At), "id": e.ID, "source": e.Source, "priority": e.Priority,
		"event": e.Event, "from": e.From, "to": e.To, "cause": e.Cause, "by": e.By, "value": scriptValue(e.Value),
		"quality": e.Quality.String()}
	if e.Note != "" {
		m["note"] = e.Note
	}
	return m
}

// scriptResults is an operation's results for a script.
func scriptResults(res []gateway.AlarmResult, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(res))
	for i, r := range res {
		out[i] = map[string]any{"id": r.ID, "status": r.Status.String()}
		if r.Reason != "" {
			out[i]["reason"] = r.Reason
		}
	}
	return json.Marshal(out)
}
