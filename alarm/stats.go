package alarm

import (
	"sort"
	"strings"
	"time"
)

// Alarm-rate figures of EEMUA 191 (3rd edition, 2013, §6.3 and Annex A:
// alarms per operator per 10 minutes and per hour, floods as more than 10
// alarms in 10 minutes, standing/stale alarms) and ISA-18.2-2016 §16.5
// (chattering: 3 or more activations in 60 s; the top 10 most frequent
// alarms). Counted are the alarms presented to operators: annunciated
// activations and alarms still active when their shelving, suppression or
// out of service ended. The counts live in 10-minute intervals aligned to
// the clock, over the last 24 h, and are rebuilt from the journal at start.

const (
	statsBucket = 10 * time.Minute
	statsSpan   = 24 * time.Hour
	statsSlots  = int(statsSpan / statsBucket)
	// FloodThreshold is EEMUA 191's flood: more than this many alarms in
	// one 10-minute interval.
	FloodThreshold = 10
	// StaleAfter is how long an alarm must be active to be stale.
	StaleAfter = 24 * time.Hour
	// TopN is how many of the most frequent alarms Stats lists.
	TopN = 10
)

type statBucket struct {
	start time.Time
	total int
	per   map[string]int
}

// stats holds the annunciations of the last 24 h in 10-minute intervals.
type stats struct {
	ring [statsSlots]statBucket
}

func newStats() *stats { return &stats{} }

func slotOf(start time.Time) int {
	n := start.Unix() / int64(statsBucket/time.Second)
	return int(((n % int64(statsSlots)) + int64(statsSlots)) % int64(statsSlots))
}

// record counts one annunciation of alarm id at at.
func (s *stats) record(at time.Time, id string) {
	start := at.UTC().Truncate(statsBucket)
	b := &s.ring[slotOf(start)]
	if !b.start.Equal(start) {
		if start.Before(b.start) {
			return // older than what the ring holds now
		}
		*b = statBucket{start: start, per: map[string]int{}}
	}
	b.total++
	b.per[id]++
}

// Count is how often an alarm was annunciated.
type Count struct {
	ID    string
	Count int
}

// Interval is the count of annunciations in one 10-minute interval.
type Interval struct {
	Start time.Time
	Count int
}

// Stats are the EEMUA 191 figures over a window ending now (From, To):
// annunciations in it, their average rate per 10 minutes and per hour, the
// busiest 10-minute interval, the floods (intervals with more than
// FloodThreshold) and the share of the window's intervals in flood, the
// alarms active longer than StaleAfter, the TopN most frequent, the
// chattering ones, the current counts by state and overlay, and each
// interval's count, oldest first.
type Stats struct {
	Window          time.Duration
	From, To        time.Time
	Activations     int
	RatePer10Min    float64
	RatePerHour     float64
	Max10Min        int
	Floods          int
	FloodPercent    float64
	Stale           []string
	Top             []Count
	Chattering      []string
	ChatteringTotal uint64
	Alarms          int
	Active          int
	Unacked         int
	Shelved         int
	Suppressed      int
	OutOfService    int
	NotEvaluable    int
	Intervals       []Interval
}

// sourceOf is the tag path of an alarm id "<path>:<name>".
func sourceOf(id string) string {
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		return id[:i]
	}
	return id
}

// Stats returns the figures over the last window (clamped to 10 minutes
// .. 24 hours) of the alarms whose source allow accepts (nil: all).
func (e *Engine) Stats(window time.Duration, allow func(source string) bool) Stats {
	window = min(max(window, statsBucket), statsSpan)
	if allow == nil {
		allow = func(string) bool { return true }
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now().UTC()
	out := Stats{Window: window, To: now, From: now.Add(-window), Stale: []string{}, Top: []Count{}, Chattering: []string{},
		ChatteringTotal: e.chatterTotal, Intervals: []Interval{}}
	first := now.Add(-window).Truncate(statsBucket).Add(statsBucket)
	per := map[string]int{}
	intervals := 0
	for start := first; !start.After(now); start = start.Add(statsBucket) {
		intervals++
		b := &e.stats.ring[slotOf(start)]
		n := 0
		if b.start.Equal(start) {
			for id, c := range b.per {
				if allow(sourceOf(id)) {
					n += c
					per[id] += c
				}
			}
		}
		out.Intervals = append(out.Intervals, Interval{Start: start, Count: n})
		out.Activations += n
		out.Max10Min = max(out.Max10Min, n)
		if n > FloodThreshold {
			out.Floods++
		}
	}
	out.RatePer10Min = float64(out.Activations) / (float64(window) / float64(statsBucket))
	out.RatePerHour = float64(out.Activations) / window.Hours()
	if intervals > 0 {
		out.FloodPercent = 100 * float64(out.Floods) / float64(intervals)
	}
	for id, c := range per {
		out.Top = append(out.Top, Count{ID: id, Count: c})
	}
	sort.Slice(out.Top, func(i, j int) bool {
		if out.Top[i].Count != out.Top[j].Count {
			return out.Top[i].Count > out.Top[j].Count
		}
		return out.Top[i].ID < out.Top[j].ID
	})
	if len(out.Top) > TopN {
		out.Top = out.Top[:TopN]
	}
	for _, in := range e.insts {
		if !allow(in.Source) {
			continue
		}
		out.Alarms++
		switch {
		case in.shelf != nil:
			out.Shelved++
		case in.oos:
			out.OutOfService++
		case in.suppressed:
			out.Suppressed++
		default:
			if in.active {
				out.Active++
				if now.Sub(in.activeSince) > StaleAfter {
					out.Stale = append(out.Stale, in.ID)
				}
			}
			if !in.acked {
				out.Unacked++
			}
		}
		if !in.evaluable {
			out.NotEvaluable++
		}
		if in.chattering {
			out.Chattering = append(out.Chattering, in.ID)
		}
	}
	return out
}

// Metrics are the engine's figures for Prometheus (the /metrics route
// exports them; docs/alarms.md, "Metrics", names each series): the alarms
// by state (annunciated only) and by overlay, the active ones by priority,
// counters since the start (annunciations, transitions, chattering flags
// raised, evaluations, tag changes taken, changes the feed lost, resyncs,
// journal commit failures and entries lost to them, transitions lost by
// slow subscribers), the journal's size, and the rate figures of the last
// hour (per 10 minutes) and the floods of the last 24 h.
type Metrics struct {
	Alarms           int
	ByState          map[string]int
	Shelved          int
	Suppressed       int
	OutOfService     int
	NotEvaluable     int
	Chattering       int
	ActiveByPriority map[string]int

	ActivationsTotal    uint64
	TransitionsTotal    uint64
	ChatteringTotal     uint64
	EvaluationsTotal    uint64
	ChangesTotal        uint64
	FeedDroppedTotal    uint64
	ResyncsTotal        uint64
	CommitErrorsTotal   uint64
	LostEntriesTotal    uint64
	SubscriberDropTotal uint64

	JournalEntries uint64
	JournalBytes   uint64

	RatePer10Min float64 // over the last hour
	Floods24h    int
}

// Metrics returns the engine's figures now.
func (e *Engine) Metrics() Metrics {
	hour := e.Stats(time.Hour, nil)
	day := e.Stats(statsSpan, nil)
	e.mu.Lock()
	m := Metrics{Alarms: len(e.insts), ByState: map[string]int{}, ActiveByPriority: map[string]int{},
		ActivationsTotal: e.activations, TransitionsTotal: e.transitions, ChatteringTotal: e.chatterTotal,
		EvaluationsTotal: e.evaluations, ChangesTotal: e.changes, FeedDroppedTotal: e.feedDropped.Load(),
		ResyncsTotal: e.resyncs, CommitErrorsTotal: e.commitErrors, LostEntriesTotal: e.lostEntries,
		SubscriberDropTotal: e.subDropped.Load(), RatePer10Min: hour.RatePer10Min, Floods24h: day.Floods}
	for _, s := range stateNames {
		m.ByState[s] = 0
	}
	for p := PriorityDiagnostic; p <= PriorityCritical; p++ {
		m.ActiveByPriority[p.String()] = 0
	}
	for _, in := range e.insts {
		switch {
		case in.shelf != nil:
			m.Shelved++
		case in.oos:
			m.OutOfService++
		case in.suppressed:
			m.Suppressed++
		default:
			m.ByState[in.state().String()]++
			if in.active {
				m.ActiveByPriority[in.Def.Priority.String()]++
			}
		}
		if !in.evaluable {
			m.NotEvaluable++
		}
		if in.chattering {
			m.Chattering++
		}
	}
	e.mu.Unlock()
	if e.opts.Journal != nil {
		if info, err := e.opts.Journal.AlarmJournalInfo(); err == nil {
			m.JournalEntries, m.JournalBytes = info.Entries, info.Bytes
		}
	}
	return m
}
