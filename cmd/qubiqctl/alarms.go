package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
	"qubiq.dev/edge/value"
)

// The alarm commands (docs/alarms.md, "qubiqctl"): list, ack, shelve,
// unshelve, note, journal, stats, over the /api/v1/alarms routes.

var alarmFlags struct {
	states, priorities, prefix string
	includeNormal, all         bool
	dur                        time.Duration
	oneShot                    bool
	from, to, path, state, pri string
	after                      uint64
	limit                      int
	newest                     bool
	window                     time.Duration
}

func init() {
	commands["alarms list"] = command{name: "alarms list", args: "[--state S,...] [--priority P,...] [--prefix FOLDER] [--all]",
		help: "List alarms, most important first: by default those not normal, plus the shelved ones.",
		flags: func(fs *flag.FlagSet, _ *opts) {
			fs.StringVar(&alarmFlags.states, "state", "", "states: normal, active_unacked, active_acked, rtn_unacked (comma-separated)")
			fs.StringVar(&alarmFlags.priorities, "priority", "", "priorities: diagnostic, low, medium, high, critical (comma-separated)")
			fs.StringVar(&alarmFlags.prefix, "prefix", "", "only alarms of tags under this folder (or this tag)")
			fs.BoolVar(&alarmFlags.includeNormal, "all", false, "every alarm, normal ones included")
		}, run: cmdAlarmsList}
	commands["alarms ack"] = command{name: "alarms ack", args: "ID... | --all",
		help: "Acknowledge alarms (or every unacknowledged one); exit 1 unless each is Good.",
		flags: func(fs *flag.FlagSet, _ *opts) {
			fs.BoolVar(&alarmFlags.all, "all", false, "every unacknowledged alarm the key may see")
		}, run: cmdAlarmsAck, complete: completeAlarms}
	commands["alarms shelve"] = command{name: "alarms shelve", args: "ID... (--for DURATION | --one-shot [--for DURATION])",
		help: "Shelve alarms for a while (never forever: at most the daemon's alarms.max_shelve, 24h by default), or one-shot until they next return to normal.",
		flags: func(fs *flag.FlagSet, _ *opts) {
			fs.DurationVar(&alarmFlags.dur, "for", 0, "how long, e.g. 30m, 2h")
			fs.BoolVar(&alarmFlags.oneShot, "one-shot", false, "until the alarm next returns to normal (at most --for, or the maximum)")
		}, run: cmdAlarmsShelve, complete: completeAlarms}
	commands["alarms unshelve"] = command{name: "alarms unshelve", args: "ID...",
		help: "End the shelving of alarms; one still active is annunciated again.", run: cmdAlarmsUnshelve, complete: completeAlarms}
	commands["alarms note"] = command{name: "alarms note", args: "ID TEXT...", help: "Add a note to an alarm.",
		run: cmdAlarmsNote, complete: completeAlarms}
	commands["alarms journal"] = command{name: "alarms journal",
		args: "[--from RFC3339] [--to RFC3339] [--path P] [--priority P] [--state S] [--limit N] [--after SEQ] [--newest]",
		help: "List journal entries (every transition of every alarm), oldest first; --after continues a listing.",
		flags: func(fs *flag.FlagSet, _ *opts) {
			fs.StringVar(&alarmFlags.from, "from", "", "entries at or after this time (RFC 3339, or a duration ago: 1h)")
			fs.StringVar(&alarmFlags.to, "to", "", "entries at or before this time (RFC 3339, or a duration ago)")
			fs.StringVar(&alarmFlags.path, "path", "", "a tag, a folder (whole segments) or an alarm id")
			fs.StringVar(&alarmFlags.pri, "priority", "", "one priority")
			fs.StringVar(&alarmFlags.state, "state", "", "entries into this state (active_unacked, shelved, ...)")
			fs.IntVar(&alarmFlags.limit, "limit", 100, "at most this many entries (1 to 1000)")
			fs.Uint64Var(&alarmFlags.after, "after", 0, "continue after this sequence number (the \"next\" of the last listing)")
			fs.BoolVar(&alarmFlags.newest, "newest", false, "newest first")
		}, run: cmdAlarmsJournal}
	commands["alarms stats"] = command{name: "alarms stats", args: "[--window DURATION]",
		help: "Show the EEMUA 191 alarm figures: rates per 10 minutes and per hour, floods, stale, top 10, chattering.",
		flags: func(fs *flag.FlagSet, _ *opts) {
			fs.DurationVar(&alarmFlags.window, "window", time.Hour, "the window, 10m to 24h")
		}, run: cmdAlarmsStats}
}

func cmdAlarmsList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	list, err := c.c.ListAlarms(ctx, client.AlarmFilter{States: splitList(alarmFlags.states), Priorities: splitList(alarmFlags.priorities),
		Prefix: alarmFlags.prefix, IncludeNormal: alarmFlags.includeNormal})
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(list)
	}
	t := newTable(c.stdout, "PRIORITY", "STATE", "ID", "SINCE", "FLAGS", "MESSAGE")
	for _, a := range list.Alarms {
		// SINCE is when the alarm became active; an alarm that is not
		// active (returned to normal, unacknowledged) has none: "-", not
		// formatTimePtr's "never", which reads as "was never active".
		since := "-"
		if a.ActiveSince != nil {
			since = formatTime(*a.ActiveSince)
		}
		t.row(a.Priority, a.State, a.ID, since, alarmFlagsOf(a), a.Message)
	}
	if err := t.flush(); err != nil {
		return err
	}
	highest := "none"
	if list.Highest != nil {
		highest = *list.Highest
	}
	_, err = fmt.Fprintf(c.stdout, "%d unacknowledged, %d active, highest priority %s\n", list.Unacked, list.Active, highest)
	return err
}

// alarmFlagsOf names the overlays and conditions of an alarm in a word
// each ("-" when none).
func alarmFlagsOf(a apitypes.Alarm) string {
	var fs []string
	if a.Shelved != nil {
		s := "shelved until " + a.Shelved.Until.UTC().Format("15:04:05Z") + " by " + a.Shelved.By
		if a.Shelved.OneShot {
			s += " (one-shot)"
		}
		fs = append(fs, s)
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{a.Suppressed, "suppressed"}, {a.OutOfService, "out-of-service"}, {a.Latched, "latched"}, {a.Chattering, "chattering"},
		{!a.Evaluable, "not-evaluable: " + a.Reason}} {
		if f.on {
			fs = append(fs, f.name)
		}
	}
	return orDash(strings.Join(fs, ", "))
}

// alarmResults prints the per-alarm results and fails unless each is Good.
func alarmResults(c *cli, what string, res []apitypes.AlarmResult) error {
	if c.g.json {
		if err := c.printJSON(res); err != nil {
			return err
		}
	} else {
		t := newTable(c.stdout, "ID", "STATUS", "REASON")
		for _, r := range res {
			t.row(r.ID, r.Status, orDash(r.Reason))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	bad := 0
	for _, r := range res {
		if r.Status != value.Good.String() {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d alarms were not %s (status not Good)", bad, len(res), what)
	}
	return nil
}

func cmdAlarmsAck(ctx context.Context, c *cli, _ *opts, args []string) error {
	if alarmFlags.all != (len(args) == 0) {
		return usagef("want ID... or --all")
	}
	res, err := c.c.AckAlarms(ctx, args, alarmFlags.all)
	if err != nil {
		return err
	}
	return alarmResults(c, "acknowledged", res)
}

func cmdAlarmsShelve(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, -1, "ID..."); err != nil {
		return err
	}
	if alarmFlags.dur <= 0 && !alarmFlags.oneShot {
		return usagef("want --for DURATION or --one-shot: shelving is never forever")
	}
	res, err := c.c.ShelveAlarms(ctx, args, alarmFlags.dur, alarmFlags.oneShot)
	if err != nil {
		return err
	}
	return alarmResults(c, "shelved", res)
}

func cmdAlarmsUnshelve(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, -1, "ID..."); err != nil {
		return err
	}
	res, err := c.c.UnshelveAlarms(ctx, args)
	if err != nil {
		return err
	}
	return alarmResults(c, "unshelved", res)
}

func cmdAlarmsNote(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 2, -1, "ID TEXT..."); err != nil {
		return err
	}
	if err := c.c.AddAlarmNote(ctx, args[0], strings.Join(args[1:], " ")); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(apitypes.OK{OK: true})
	}
	_, err := fmt.Fprintf(c.stdout, "note added to %s\n", args[0])
	return err
}

// sinceOrTime reads an RFC 3339 time or a duration before now ("1h").
func sinceOrTime(flagName, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("--%s %q: want RFC 3339 (2025-03-01T12:00:00Z) or a duration ago (1h)", flagName, s)
	}
	return t, nil
}

func cmdAlarmsJournal(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	from, err := sinceOrTime("from", alarmFlags.from)
	if err != nil {
		return err
	}
	to, err := sinceOrTime("to", alarmFlags.to)
	if err != nil {
		return err
	}
	page, err := c.c.AlarmJournal(ctx, client.AlarmJournalQuery{From: from, To: to, Path: alarmFlags.path, Priority: alarmFlags.pri,
		State: alarmFlags.state, After: alarmFlags.after, Desc: alarmFlags.newest, Limit: alarmFlags.limit})
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(page)
	}
	t := newTable(c.stdout, "SEQ", "TIME", "ID", "PRIORITY", "EVENT", "FROM", "TO", "BY", "VALUE", "CAUSE")
	for _, e := range page.Entries {
		cause := e.Cause
		if e.Note != "" {
			cause = "note: " + e.Note
		}
		t.row(fmt.Sprint(e.Seq), formatTime(e.At), e.ID, e.Priority, e.Event, e.From, e.To, orDash(e.By),
			string(compactJSON(e.Value))+" "+e.Quality, strings.ReplaceAll(cause, "\n", " "))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.Next != nil {
		_, err = fmt.Fprintf(c.stdout, "more: --after %d\n", *page.Next)
	}
	return err
}

func cmdAlarmsStats(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	st, err := c.c.AlarmStats(ctx, alarmFlags.window)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(st)
	}
	top := make([]string, len(st.Top))
	for i, x := range st.Top {
		top[i] = fmt.Sprintf("%s (%d)", x.ID, x.Count)
	}
	t := newTable(c.stdout, "FIGURE", "VALUE")
	for _, r := range [][2]string{
		{"window", fmt.Sprintf("%gh (%s .. %s)", st.WindowH, formatTime(st.From), formatTime(st.To))},
		{"annunciations", fmt.Sprint(st.Activations)},
		{"rate per 10 min", fmt.Sprintf("%.2f", st.RatePer10Min)},
		{"rate per hour", fmt.Sprintf("%.2f", st.RatePerHour)},
		{"busiest 10 min", fmt.Sprint(st.MaxPer10Min)},
		{"floods (>10 in 10 min)", fmt.Sprintf("%d (%.1f%% of the window)", st.Floods, st.FloodPercent)},
		{"stale (active > 24h)", orDash(strings.Join(st.Stale, ", "))},
		{"chattering", orDash(strings.Join(st.Chattering, ", "))},
		{"top 10", orDash(strings.Join(top, ", "))},
		{"alarms", fmt.Sprintf("%d: %d active, %d unacknowledged, %d shelved, %d suppressed, %d out of service, %d not evaluable",
			st.Alarms, st.Active, st.Unacked, st.Shelved, st.Suppressed, st.OutOfService, st.NotEvaluable)},
	} {
		t.row(r[0], r[1])
	}
	return t.flush()
}

// completeAlarms offers the ids of the alarms not normal.
func completeAlarms(ctx context.Context, c *cli, _ []string, word string) []string {
	list, err := c.c.ListAlarms(ctx, client.AlarmFilter{})
	if err != nil {
		return []string{}
	}
	var out []string
	for _, a := range list.Alarms {
		if strings.HasPrefix(a.ID, word) {
			out = append(out, a.ID)
		}
	}
	return out
}
