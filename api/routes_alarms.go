package api

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// alarmRoutes are the alarm routes (docs/alarms.md, "REST"; the route
// table, testdata/routes.md): reads need alarm:read; acknowledge, shelve,
// unshelve and note need alarm:ack here, and per alarm the grant's write
// level at or above its ack_level or shelve_level, which the service layer
// checks (a refusal is per alarm in the results, like tag writes).
var alarmRoutes = []route{
	{method: "GET", path: prefix + "/alarms", need: scope(auth.AlarmRead), handle: (*Server).listAlarms},
	{method: "GET", path: prefix + "/alarms/journal", need: scope(auth.AlarmRead), handle: (*Server).alarmJournal},
	{method: "GET", path: prefix + "/alarms/stats", need: scope(auth.AlarmRead), handle: (*Server).alarmStats},
	{method: "POST", path: prefix + "/alarms/ack", need: scope(auth.AlarmAck), handle: (*Server).ackAlarms},
	{method: "POST", path: prefix + "/alarms/shelve", need: scope(auth.AlarmAck), handle: (*Server).shelveAlarms},
	{method: "POST", path: prefix + "/alarms/unshelve", need: scope(auth.AlarmAck), handle: (*Server).unshelveAlarms},
	{method: "POST", path: prefix + "/alarms/note", need: scope(auth.AlarmAck), handle: (*Server).alarmNote},
}

func init() { routes = append(routes, alarmRoutes...) } // alarms (routes_alarms.go)

// alarmsDep answers 501 when the daemon has no alarms.
func (s *Server) alarmsDep(r *http.Request) error {
	if s.deps.Alarms == nil {
		return errorf(http.StatusNotImplemented, KindNotImplemented, "%s %s is not available in this daemon (alarms)", r.Method, r.URL.Path)
	}
	return nil
}

// onlyParams refuses a query parameter not in allowed, naming them.
func onlyParams(r *http.Request, allowed ...string) error {
	for k := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return errorf(http.StatusBadRequest, KindInvalid, "unknown query parameter %q (want %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// listParam is a parameter given as a comma-separated list, repeated, or
// both.
func listParam(r *http.Request, k string) []string {
	var out []string
	for _, v := range r.URL.Query()[k] {
		for _, x := range strings.Split(v, ",") {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
	}
	return out
}

func boolParam(r *http.Request, k string) (bool, error) {
	v := r.URL.Query().Get(k)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, KindInvalid, "%s %q: want true or false", k, v)
	}
	return b, nil
}

func (s *Server) listAlarms(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	if err := onlyParams(r, "state", "priority", "prefix", "include_normal"); err != nil {
		return err
	}
	incl, err := boolParam(r, "include_normal")
	if err != nil {
		return err
	}
	list, err := s.deps.Alarms.ListAlarms(r.Context(), g, gateway.AlarmFilter{States: listParam(r, "state"),
		Priorities: listParam(r, "priority"), Prefix: r.URL.Query().Get("prefix"), IncludeNormal: incl})
	if err != nil {
		return err
	}
	out := apitypes.AlarmList{Alarms: make([]apitypes.Alarm, len(list.Alarms)), Unacked: list.Unacked, Active: list.Active,
		Highest: optString(list.Highest)}
	for i, a := range list.Alarms {
		out.Alarms[i] = wireAlarm(a)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) alarmJournal(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	if err := onlyParams(r, "from", "to", "path", "priority", "state", "limit", "after", "order"); err != nil {
		return err
	}
	qv := r.URL.Query()
	q := gateway.AlarmJournalQuery{Path: qv.Get("path"), Priority: qv.Get("priority"), State: qv.Get("state")}
	var err error
	if v := qv.Get("from"); v != "" {
		if q.From, err = parseTimeParam("from", v); err != nil {
			return err
		}
	}
	if v := qv.Get("to"); v != "" {
		if q.To, err = parseTimeParam("to", v); err != nil {
			return err
		}
	}
	if v := qv.Get("limit"); v != "" {
		if q.Limit, err = strconv.Atoi(v); err != nil || q.Limit < 1 {
			return errorf(http.StatusBadRequest, KindInvalid, "limit %q: want a whole number from 1 to 1000", v)
		}
	}
	if v := qv.Get("after"); v != "" {
		if q.After, err = strconv.ParseUint(v, 10, 64); err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, "after %q: want the next of a previous page", v)
		}
	}
	switch o := qv.Get("order"); o {
	case "", "asc":
	case "desc":
		q.Desc = true
	default:
		return errorf(http.StatusBadRequest, KindInvalid, "order %q: want asc (oldest first) or desc (newest first)", o)
	}
	page, err := s.deps.Alarms.AlarmJournal(r.Context(), g, q)
	if err != nil {
		return err
	}
	out := apitypes.AlarmJournal{Entries: make([]apitypes.AlarmJournalEntry, len(page.Entries))}
	for i, e := range page.Entries {
		out.Entries[i] = apitypes.AlarmJournalEntry{Seq: e.Seq, At: e.At.UTC(), ID: e.ID, Source: e.Source, Priority: e.Priority,
			Event: e.Event, From: e.From, To: e.To, Cause: e.Cause, By: e.By, Value: wireValue(e.Value), Quality: e.Quality.String(), Note: e.Note}
	}
	if page.Next != 0 {
		n := page.Next
		out.Next = &n
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) alarmStats(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	if err := onlyParams(r, "window_h"); err != nil {
		return err
	}
	window := time.Hour
	if v := r.URL.Query().Get("window_h"); v != "" {
		h, err := strconv.ParseFloat(v, 64)
		if err != nil || h < 1.0/6 || h > 24 {
			return errorf(http.StatusBadRequest, KindInvalid, "window_h %q: want hours from 0.1667 (10 minutes) to 24", v)
		}
		window = time.Duration(h * float64(time.Hour))
	}
	st, err := s.deps.Alarms.AlarmStats(r.Context(), g, window)
	if err != nil {
		return err
	}
	out := apitypes.AlarmStats{WindowH: st.Window.Hours(), From: st.From.UTC(), To: st.To.UTC(), Activations: st.Activations,
		RatePer10Min: st.RatePer10Min, RatePerHour: st.RatePerHour, MaxPer10Min: st.Max10Min, Floods: st.Floods,
		FloodPercent: st.FloodPercent, Stale: nonNil(st.Stale), Chattering: nonNil(st.Chattering), ChatteringTotal: st.ChatteringTotal,
		Alarms: st.Alarms, Active: st.Active, Unacked: st.Unacked, Shelved: st.Shelved, Suppressed: st.Suppressed,
		OutOfService: st.OutOfService, NotEvaluable: st.NotEvaluable,
		Top: make([]apitypes.AlarmCount, len(st.Top)), Intervals: make([]apitypes.AlarmInterval, len(st.Intervals))}
	for i, c := range st.Top {
		out.Top[i] = apitypes.AlarmCount{ID: c.ID, Count: c.Count}
	}
	for i, iv := range st.Intervals {
		out.Intervals[i] = apitypes.AlarmInterval{Start: iv.Start.UTC(), Count: iv.Count}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// needIDs refuses an operation without ids.
func needIDs(ids []string) error {
	if len(ids) == 0 {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "ids" (a list of alarm ids, as GET /api/v1/alarms lists them)`)
	}
	return nil
}

func (s *Server) writeAlarmResults(w http.ResponseWriter, r *http.Request, res []gateway.AlarmResult) {
	out := apitypes.AlarmResults{Results: make([]apitypes.AlarmResult, len(res))}
	for i, x := range res {
		out.Results[i] = apitypes.AlarmResult{ID: x.ID, Status: x.Status.String(), Reason: x.Reason}
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

func (s *Server) ackAlarms(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	var req apitypes.AlarmAckRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if !req.All {
		if err := needIDs(req.IDs); err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, `missing "ids" (or "all": true)`)
		}
	}
	res, err := s.deps.Alarms.AckAlarms(r.Context(), g, req.IDs, req.All)
	if err != nil {
		return err
	}
	s.writeAlarmResults(w, r, res)
	return nil
}

func (s *Server) shelveAlarms(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	var req apitypes.AlarmShelveRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if err := needIDs(req.IDs); err != nil {
		return err
	}
	// A duration beyond what time.Duration holds (about 292 years) would
	// wrap to a negative one; it is longer than any max_shelve anyway.
	if req.DurationS < 0 || req.DurationS > float64(math.MaxInt64/int64(time.Second)) {
		return errorf(http.StatusBadRequest, KindInvalid, "duration_s: %g is out of range (0 to %d seconds; alarms.max_shelve bounds it further)", req.DurationS, math.MaxInt64/int64(time.Second))
	}
	res, err := s.deps.Alarms.ShelveAlarms(r.Context(), g, req.IDs, time.Duration(req.DurationS*float64(time.Second)), req.OneShot)
	if err != nil {
		return err
	}
	s.writeAlarmResults(w, r, res)
	return nil
}

func (s *Server) unshelveAlarms(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	var req apitypes.AlarmUnshelveRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if err := needIDs(req.IDs); err != nil {
		return err
	}
	res, err := s.deps.Alarms.UnshelveAlarms(r.Context(), g, req.IDs)
	if err != nil {
		return err
	}
	s.writeAlarmResults(w, r, res)
	return nil
}

func (s *Server) alarmNote(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.alarmsDep(r); err != nil {
		return err
	}
	var req apitypes.AlarmNoteRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.ID == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "id"`)
	}
	if err := s.deps.Alarms.AddAlarmNote(r.Context(), g, req.ID, req.Text); err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.OK{OK: true})
	return nil
}

// wireAlarm is an alarm's wire form.
func wireAlarm(a gateway.Alarm) apitypes.Alarm {
	out := apitypes.Alarm{ID: a.ID, Name: a.Name, Source: a.Source, DisplayPath: a.DisplayPath, Priority: a.Priority, Mode: a.Mode,
		AckMode: a.AckMode, State: a.State, Active: a.Active, Acked: a.Acked, Suppressed: a.Suppressed, OutOfService: a.OutOfService,
		Latched: a.Latched, Chattering: a.Chattering, Evaluable: a.Evaluable, Reason: a.Reason, Message: a.Message,
		Value: wireValue(a.Value), Units: a.Units, Quality: a.Quality.String(), Timestamp: optTime(a.Timestamp), Setpoint: a.Setpoint, Low: a.Low, High: a.High,
		ActiveSince: optTime(a.ActiveSince), AckedAt: optTime(a.AckedAt), AckedBy: optString(a.AckedBy),
		LastChange: optTime(a.LastChange), AckLevel: a.AckLevel.String(), ShelveLevel: a.ShelveLevel.String(),
		Notes: make([]apitypes.AlarmNote, len(a.Notes))}
	if a.Shelf != nil {
		out.Shelved = &apitypes.AlarmShelf{By: a.Shelf.By, Until: a.Shelf.Until.UTC(), OneShot: a.Shelf.OneShot, At: a.Shelf.At.UTC()}
	}
	for i, n := range a.Notes {
		out.Notes[i] = apitypes.AlarmNote{By: n.By, At: n.At.UTC(), Text: n.Text}
	}
	return out
}

// wireValue is a tag value as JSON (integers exact); null when none or
// when it does not encode.
func wireValue(v any) []byte {
	raw, err := apitypes.EncodeValue(v)
	if err != nil || len(raw) == 0 {
		return []byte("null")
	}
	return raw
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
