package flow

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed cron expression: the five fields of crontab(5) —
// minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
// jan-dec), day of week (0-7 or sun-sat; 0 and 7 are Sunday) — each `*`,
// a number, a range `a-b`, a step `*/n` or `a-b/n`, or a list of those
// separated by commas. As in Vixie cron, when both the day of month and
// the day of week are restricted (neither is `*`), a day matches when
// either does. The shorthands @hourly, @daily (@midnight), @weekly,
// @monthly and @yearly (@annually) are accepted. Times are the
// appliance's local time (the TZ of qubiqd).
//
// It is this package's own (some 150 lines): the usual Go modules
// (robfig/cron) bring a scheduler of their own, which the flows do not
// need, and their last release is from 2020; a parser with a table test is
// smaller than the dependency.
type Cron struct {
	minute, hour, dom, month, dow uint64 // bit i set: value i matches
	domStar, dowStar              bool
	text                          string
}

var cronShorthands = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var (
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dayNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

// ParseCron parses a cron expression; the error names the field and what
// is wrong with it.
func ParseCron(s string) (*Cron, error) {
	text := strings.TrimSpace(s)
	expr := text
	if sh, ok := cronShorthands[strings.ToLower(expr)]; ok {
		expr = sh
	}
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return nil, fmt.Errorf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), have %d", text, len(fields))
	}
	c := &Cron{text: text}
	specs := []struct {
		name     string
		lo, hi   int
		names    []string
		nameBase int
		dst      *uint64
	}{
		{"minute", 0, 59, nil, 0, &c.minute},
		{"hour", 0, 23, nil, 0, &c.hour},
		{"day of month", 1, 31, nil, 0, &c.dom},
		{"month", 1, 12, monthNames, 1, &c.month},
		{"day of week", 0, 7, dayNames, 0, &c.dow},
	}
	for i, sp := range specs {
		m, err := cronField(fields[i], sp.lo, sp.hi, sp.names, sp.nameBase)
		if err != nil {
			return nil, fmt.Errorf("cron %q: %s field %q: %w", text, sp.name, fields[i], err)
		}
		*sp.dst = m
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow |= 1
	}
	c.domStar = fields[2] == "*" || fields[2] == "?"
	c.dowStar = fields[4] == "*" || fields[4] == "?"
	if !c.domStar && c.dowStar && !c.someDayExists() {
		// Next would find no time, and the trigger would never fire.
		return nil, fmt.Errorf("cron %q: day of month %q never falls in month %q (the flow would never run)", text, fields[2], fields[3])
	}
	return c, nil
}

// daysIn is the most days each month has (February in a leap year).
var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// someDayExists reports whether a day of month of c exists in a month of c.
func (c *Cron) someDayExists() bool {
	for m := 1; m <= 12; m++ {
		if c.month&(1<<uint(m)) == 0 {
			continue
		}
		for d := 1; d <= daysIn[m]; d++ {
			if c.dom&(1<<uint(d)) != 0 {
				return true
			}
		}
	}
	return false
}

func cronField(f string, lo, hi int, names []string, nameBase int) (uint64, error) {
	var mask uint64
	for part := range strings.SplitSeq(f, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q: want a whole number of at least 1", stepText)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*" || rng == "?":
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err error
			if a, err = cronValue(x, lo, hi, names, nameBase); err != nil {
				return 0, err
			}
			if b, err = cronValue(y, lo, hi, names, nameBase); err != nil {
				return 0, err
			}
			if b < a {
				return 0, fmt.Errorf("range %q runs backwards", rng)
			}
		default:
			v, err := cronValue(rng, lo, hi, names, nameBase)
			if err != nil {
				return 0, err
			}
			a = v
			if !hasStep {
				b = v
			}
		}
		for v := a; v <= b; v += step {
			mask |= 1 << uint(v)
		}
	}
	return mask, nil
}

func cronValue(s string, lo, hi int, names []string, nameBase int) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return i + nameBase, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		if names != nil {
			return 0, fmt.Errorf("%q: want %d-%d or a name (%s)", s, lo, hi, strings.Join(names, ", "))
		}
		return 0, fmt.Errorf("%q: want %d-%d", s, lo, hi)
	}
	return v, nil
}

// String returns the expression as written.
func (c *Cron) String() string { return c.text }

func (c *Cron) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<uint(t.Day())) != 0
	dow := c.dow&(1<<uint(t.Weekday())) != 0
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	}
	return dom || dow
}

// Next returns the first minute after t (in t's location) that the
// expression matches, or the zero time when none comes within five years
// (an expression such as "0 0 30 2 *", February 30th).
func (c *Cron) Next(t time.Time) time.Time {
	t = t.Truncate(time.Minute).Add(time.Minute)
	end := t.AddDate(5, 0, 0)
	for t.Before(end) {
		if c.month&(1<<uint(t.Month())) == 0 {
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location())
			continue
		}
		if !c.dayMatches(t) {
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
			continue
		}
		if c.hour&(1<<uint(t.Hour())) == 0 {
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, t.Location())
			continue
		}
		if c.minute&(1<<uint(t.Minute())) == 0 {
			// The next matching minute of this hour, or the next hour.
			rest := c.minute >> uint(t.Minute()+1)
			if rest == 0 {
				t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, t.Location())
				continue
			}
			t = t.Add(time.Duration(bits.TrailingZeros64(rest)+1) * time.Minute)
			continue
		}
		return t
	}
	return time.Time{}
}
