package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"qubiq.dev/edge/value"
)

// Queries: raw ranges and interval aggregates (system.hist.getTrends,
// GET /api/v1/history), merging blocks and the journal.

// Aggregate names a getTrends aggregate (docs/scripting.md, system.hist.getTrends).
type Aggregate string

// The aggregates of getTrends.
const (
	AggRaw   Aggregate = "raw"
	AggAvg   Aggregate = "avg" // time-weighted: each value holds until the next sample
	AggMin   Aggregate = "min"
	AggMax   Aggregate = "max"
	AggFirst Aggregate = "first"
	AggLast  Aggregate = "last"
	AggCount Aggregate = "count"
)

// ParseAggregate returns the aggregate named s; the error names s and the
// valid names (wrapping ErrInvalid).
func ParseAggregate(s string) (Aggregate, error) {
	switch a := Aggregate(s); a {
	case AggRaw, AggAvg, AggMin, AggMax, AggFirst, AggLast, AggCount:
		return a, nil
	}
	return "", fmt.Errorf("unknown aggregate %q (want raw, avg, min, max, first, last or count): %w", s, ErrInvalid)
}

// Query limits.
const (
	// MaxTrendIntervals is the most intervals one path may be split into.
	MaxTrendIntervals = 100000
	// MaxTrendPoints is the most raw points one query returns.
	MaxTrendPoints = 2000000
)

// TrendQuery is one getTrends call: the paths, the range [Start, End]
// (End zero: now), the interval (required unless Aggregate is raw) and the
// aggregate.
type TrendQuery struct {
	Paths     []string
	Start     time.Time
	End       time.Time
	Interval  time.Duration
	Aggregate Aggregate
}

// TrendPoint is one point of a trend: a raw sample, or one interval's
// aggregate stamped with the interval's start. Quality is the sample's, or
// for an aggregate Good when no bad-quality sample was excluded from the
// interval and Uncertain when some were.
type TrendPoint struct {
	Time       time.Time
	Value      value.Value
	Quality    value.Quality
	StatusCode uint32 // a raw point's OPC UA status code; 0 for aggregates
}

// Trend is one path's answer. Bad counts the bad-quality samples in the
// range (excluded from aggregates; raw trends include them with their
// quality). Known is false for a path that never recorded anything.
type Trend struct {
	Path      string
	Aggregate Aggregate
	Interval  time.Duration
	Points    []TrendPoint
	Bad       int
	Known     bool
}

// Query answers a getTrends call: for each path, in order, its raw samples
// in [Start, End] or one point per interval of Interval from Start (count
// gives every interval; the others only intervals with data). Aggregates
// use Good and Uncertain samples only. A range over MaxTrendIntervals
// intervals or MaxTrendPoints raw points wraps ErrInvalid.
func (h *History) Query(ctx context.Context, q TrendQuery) ([]Trend, error) {
	if q.Aggregate == "" {
		q.Aggregate = AggRaw
	}
	if _, err := ParseAggregate(string(q.Aggregate)); err != nil {
		return nil, fmt.Errorf("store: history query: %w", err)
	}
	now := h.opts.now()
	if q.End.IsZero() {
		q.End = now
	}
	if q.Start.IsZero() || q.End.Before(q.Start) {
		return nil, fmt.Errorf("store: history query: start %s must be set and not after end %s: %w",
			q.Start.UTC().Format(time.RFC3339Nano), q.End.UTC().Format(time.RFC3339Nano), ErrInvalid)
	}
	start, end := q.Start.UnixNano(), q.End.UnixNano()
	if q.Aggregate != AggRaw {
		if q.Interval <= 0 {
			return nil, fmt.Errorf("store: history query: aggregate %q needs an interval: %w", q.Aggregate, ErrInvalid)
		}
		if n := (end - start) / int64(q.Interval); n >= MaxTrendIntervals {
			return nil, fmt.Errorf("store: history query: %d intervals of %s per path is over %d; widen the interval: %w",
				n+1, q.Interval, MaxTrendIntervals, ErrInvalid)
		}
	}
	out := make([]Trend, 0, len(q.Paths))
	points := 0
	for _, p := range q.Paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ss, before, known, err := h.readRange(p, start, end)
		if err != nil {
			return nil, fmt.Errorf("store: history of %q: %w", p, err)
		}
		tr := Trend{Path: p, Aggregate: q.Aggregate, Interval: q.Interval, Known: known}
		if q.Aggregate == AggRaw {
			if points += len(ss); points > MaxTrendPoints {
				return nil, fmt.Errorf("store: history query: more than %d raw points; narrow the range or use an aggregate: %w",
					MaxTrendPoints, ErrInvalid)
			}
			tr.Points = make([]TrendPoint, len(ss))
			for i, s := range ss {
				tr.Points[i] = TrendPoint{Time: nsTime(s.t), Value: s.v, Quality: s.q, StatusCode: s.sc}
				if s.q.IsBad() {
					tr.Bad++
				}
			}
		} else {
			tr.Points, tr.Bad = aggregate(ss, before, start, end, int64(q.Interval), q.Aggregate, now.UnixNano())
		}
		out = append(out, tr)
	}
	return out, nil
}

// readRange returns path's samples in [start, end] in time order, the last
// sample before start (for time weighting), and whether the path is known.
func (h *History) readRange(path string, start, end int64) ([]sample, *sample, bool, error) {
	h.ckMu.RLock()
	defer h.ckMu.RUnlock()
	h.mu.RLock()
	id, known := h.ids[path]
	var open []sample
	var before *sample
	keep := func(s sample) bool {
		switch {
		case s.t < start:
			if before == nil || s.t >= before.t {
				c := s
				before = &c
			}
		case s.t <= end:
			open = append(open, s)
		}
		return true
	}
	var err error
	if se := h.open[id]; known && se != nil {
		err = se.each(keep)
	}
	h.mu.RUnlock()
	if err != nil || !known {
		return nil, nil, known, err
	}
	var ss []sample
	err = h.db.view(func(tx *bolt.Tx) error {
		data, _ := histDataBucket(tx)
		if data == nil {
			return nil
		}
		tb := data.Bucket(u32Key(id))
		if tb == nil {
			return nil
		}
		c := tb.Cursor()
		// The block before the first at or after start may hold samples
		// in range, and holds the sample before start.
		k, v := c.Seek(timeKey(start))
		var pk, pv []byte
		if k == nil {
			pk, pv = c.Last()
		} else {
			pk, pv = c.Prev()
		}
		if pk != nil {
			k, v = pk, pv
		} else {
			k, v = c.First()
		}
		for ; k != nil && keyTime(k) <= end; k, v = c.Next() {
			err := decodeBlock(v, func(s sample) bool {
				switch {
				case s.t < start:
					if before == nil || s.t >= before.t {
						c := s
						before = &c
					}
				case s.t <= end:
					ss = append(ss, s)
				}
				return true
			})
			if err != nil {
				return fmt.Errorf("block %x: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, known, err
	}
	if len(open) > 0 {
		merged := len(ss) > 0 && open[0].t < ss[len(ss)-1].t
		ss = append(ss, open...)
		if merged || !sortedSamples(open) {
			sortSamples(ss)
		}
	}
	return ss, before, known, nil
}

func sortedSamples(ss []sample) bool {
	for i := 1; i < len(ss); i++ {
		if ss[i].t < ss[i-1].t {
			return false
		}
	}
	return true
}

// aggregate computes one point per interval [a, a+iv) from start; samples
// are sorted and inside [start, end]; before is the last sample before
// start. Values hold until the next sample (for avg) and at most until
// min(end, now). It returns the points and the number of bad samples.
func aggregate(ss []sample, before *sample, start, end, iv int64, agg Aggregate, now int64) ([]TrendPoint, int) {
	var out []TrendPoint
	bad := 0
	holdEnd := min(end, now)
	// held is the value in effect (avg): numeric and not bad.
	var held float64
	hasHeld := false
	heldBad := false
	if before != nil {
		held, hasHeld = value.ToFloat(before.v)
		hasHeld = hasHeld && !before.q.IsBad()
		heldBad = before.q.IsBad()
	}
	i := 0
	for a := start; a <= end; a += iv {
		b := a + iv
		var (
			n           int
			nbad        int
			mn, mx      float64
			hasNum      bool
			first, last *sample
			wsum, wtot  float64
			cur         = a
			uncertain   = heldBad
		)
		for ; i < len(ss) && ss[i].t < b; i++ {
			s := &ss[i]
			if agg == AggAvg && hasHeld {
				if d := min(s.t, holdEnd) - cur; d > 0 {
					wsum += held * float64(d)
					wtot += float64(d)
				}
			}
			cur = max(cur, s.t)
			if s.q.IsBad() {
				nbad++
				hasHeld, heldBad = false, true
				uncertain = true
				continue
			}
			heldBad = false
			if s.q.IsUncertain() {
				uncertain = true
			}
			n++
			if first == nil {
				first = s
			}
			last = s
			if f, ok := value.ToFloat(s.v); ok {
				if !hasNum {
					mn, mx, hasNum = f, f, true
				}
				mn, mx = min(mn, f), max(mx, f)
				held, hasHeld = f, true
			} else {
				hasHeld = false
			}
		}
		bad += nbad
		q := value.Good
		if uncertain {
			q = value.Uncertain
		}
		t := nsTime(a)
		switch agg {
		case AggCount:
			out = append(out, TrendPoint{Time: t, Value: int64(n), Quality: q})
		case AggMin:
			if hasNum {
				out = append(out, TrendPoint{Time: t, Value: mn, Quality: q})
			}
		case AggMax:
			if hasNum {
				out = append(out, TrendPoint{Time: t, Value: mx, Quality: q})
			}
		case AggFirst:
			if first != nil {
				out = append(out, TrendPoint{Time: t, Value: first.v, Quality: q})
			}
		case AggLast:
			if last != nil {
				out = append(out, TrendPoint{Time: t, Value: last.v, Quality: q})
			}
		case AggAvg:
			if hasHeld {
				if d := min(b, holdEnd) - cur; d > 0 {
					wsum += held * float64(d)
					wtot += float64(d)
				}
			}
			if wtot > 0 {
				out = append(out, TrendPoint{Time: t, Value: wsum / wtot, Quality: q})
			}
		}
	}
	return out, bad
}
