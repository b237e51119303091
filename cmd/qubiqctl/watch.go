package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// tags watch: live values in the terminal over the WebSocket GET
// /api/v1/ws (docs/qubiqctl.md, "tags watch"). On a terminal the table is
// redrawn in place; otherwise (or with --lines) each change is one line;
// with --json each value is one JSON line. Ctrl-C ends it (exit 0). A lost
// connection is retried; an ended session or refused credentials end it
// with exit 1.

// Settings of watch (variables so tests can shorten them).
var (
	// watchStaleAfter: no message for this long (two of the server's 5 s
	// heartbeats) marks the values stale.
	watchStaleAfter = 10 * time.Second
	// watchRetry is the wait before reconnecting after a lost connection.
	watchRetry = 2 * time.Second
	// watchRedrawEvery bounds how often the table is redrawn, and ticks
	// the staleness check.
	watchRedrawEvery = 200 * time.Millisecond
	// isTerminal reports whether w is a terminal (redraw mode).
	isTerminal = func(w io.Writer) bool {
		f, ok := w.(*os.File)
		if !ok {
			return false
		}
		st, err := f.Stat()
		return err == nil && st.Mode()&os.ModeCharDevice != 0
	}
)

// wsMaxPaths is the server's limit of paths in one subscription.
const wsMaxPaths = 2000

func init() {
	commands["tags watch"] = command{name: "tags watch", args: "[--lines|--redraw] [--for D] " + selArgs,
		help: "Show live values as they change (over the API's WebSocket) until Ctrl-C: a table redrawn in place on a terminal, else one line per change (--json: one JSON value per line). Values are marked stale when the daemon goes quiet; a lost connection is retried.",
		long: selectionHelp,
		flags: func(fs *flag.FlagSet, _ *opts) {
			tagSel = tagSelFlags{}
			fs.BoolVar(&tagSel.all, "all", false, "every tag of the project")
			fs.BoolVar(&tagSel.lines, "lines", false, "one line per change, also on a terminal")
			fs.BoolVar(&tagSel.redraw, "redraw", false, "redraw the table in place, also when not on a terminal")
			fs.DurationVar(&tagSel.watchFor, "for", 0, "stop after this long (`DURATION`: 30s, 5m; default: until Ctrl-C)")
		}, run: cmdTagsWatch, complete: completeTags}
}

func cmdTagsWatch(ctx context.Context, c *cli, _ *opts, args []string) error {
	f := tagSel
	if f.lines && f.redraw {
		return usagef("--lines and --redraw exclude each other")
	}
	if f.watchFor < 0 {
		return usagef("--for must be positive")
	}
	paths, err := c.selectTags(ctx, args, f.all)
	if err != nil {
		return err
	}
	if len(paths) > wsMaxPaths {
		return fmt.Errorf("%d tags chosen; one watch takes at most %d: choose fewer", len(paths), wsMaxPaths)
	}
	if f.watchFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.watchFor)
		defer cancel()
	}
	v := newWatchView(c, paths, f.redraw || (!f.lines && !c.g.json && isTerminal(c.stdout)))
	for {
		err := c.watchOnce(ctx, paths, v)
		if ctx.Err() != nil {
			v.end()
			return nil
		}
		var pe *client.ProblemError
		var ce *client.CloseError
		switch {
		case !v.started:
			return err // never connected: the daemon's address or credentials are wrong
		case errors.As(err, &pe):
			v.end()
			return err
		case errors.As(err, &ce) && ce.Code != 1001 && ce.Code != 1006 && ce.Code != 1011 && ce.Code != 1012:
			v.end()
			if ce.Code == client.CloseSessionEnded {
				return fmt.Errorf("the daemon ended the watch: %s", orDash(ce.Reason))
			}
			return err
		}
		v.lost(err)
		select {
		case <-ctx.Done():
			v.end()
			return nil
		case <-time.After(watchRetry):
		}
	}
}

// watchOnce runs one WebSocket until it fails or ctx ends.
func (c *cli) watchOnce(ctx context.Context, paths []string, v *watchView) error {
	w, err := c.c.Watch(ctx, paths)
	if err != nil {
		return err
	}
	defer w.Close()
	msgs := make(chan apitypes.WSMessage)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := w.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(watchRedrawEvery)
	defer tick.Stop()
	v.connected()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return err
		case m := <-msgs:
			if err := v.message(m); err != nil {
				return err
			}
		case <-tick.C:
			v.tick()
		}
	}
}

// watchView keeps the latest value of each path and shows them.
type watchView struct {
	c       *cli
	paths   []string
	redraw  bool
	width   int // of the PATH column in line mode
	latest  map[string]apitypes.TagValue
	last    time.Time // last message of the daemon
	dirty   bool
	drawn   time.Time
	status  string // connection state shown under the table
	stale   bool
	started bool
}

func newWatchView(c *cli, paths []string, redraw bool) *watchView {
	v := &watchView{c: c, paths: paths, redraw: redraw, latest: map[string]apitypes.TagValue{}, status: "connecting"}
	for _, p := range paths {
		v.width = max(v.width, len(p))
	}
	return v
}

// watchNow is the clock of the view (tests set it).
var watchNow = time.Now

func (v *watchView) connected() {
	v.last, v.status, v.stale, v.dirty = watchNow(), "live", false, true
	if !v.redraw && v.started {
		fmt.Fprintln(v.c.stderr, "qubiqctl: reconnected")
	}
	v.started = true
}

// lost reports a lost connection (a retry follows).
func (v *watchView) lost(err error) {
	v.status = fmt.Sprintf("connection lost (%v); reconnecting every %s", err, watchRetry)
	if v.redraw {
		v.dirty = true
		v.draw()
		return
	}
	fmt.Fprintf(v.c.stderr, "qubiqctl: %s\n", v.status)
}

// message takes one message of the daemon.
func (v *watchView) message(m apitypes.WSMessage) error {
	v.last = watchNow()
	if v.stale {
		v.stale, v.status, v.dirty = false, "live", true
		if !v.redraw {
			fmt.Fprintln(v.c.stderr, "qubiqctl: the daemon answers again")
		}
	}
	switch m.Type {
	case "values":
		for _, tv := range m.Values {
			v.latest[tv.Path] = tv
			if v.redraw {
				continue
			}
			if err := v.line(tv); err != nil {
				return err
			}
		}
		v.dirty = v.dirty || len(m.Values) > 0
	case "error":
		v.status = "the daemon says: " + m.Reason
		v.dirty = true
	}
	if v.redraw && watchNow().Sub(v.drawn) >= watchRedrawEvery {
		v.draw()
	}
	return nil
}

// line prints one change: JSON with --json, else TIMESTAMP PATH VALUE
// QUALITY [REASON].
func (v *watchView) line(tv apitypes.TagValue) error {
	if v.c.g.json {
		b, err := json.Marshal(tv)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(v.c.stdout, string(b))
		return err
	}
	s := fmt.Sprintf("%s  %-*s  %s  %s", tv.Timestamp.UTC().Format(tableTime), v.width, tv.Path, cleanCell(formatValue(tv.Value)), tv.Quality)
	if tv.Reason != "" {
		s += "  " + cleanCell(tv.Reason)
	}
	_, err := fmt.Fprintln(v.c.stdout, s)
	return err
}

// tick marks the values stale when the daemon went quiet, and redraws.
func (v *watchView) tick() {
	if quiet := watchNow().Sub(v.last); quiet >= watchStaleAfter && !v.stale {
		v.stale, v.dirty = true, true
		v.status = fmt.Sprintf("STALE: no word from the daemon for %s; the values below may be old", quiet.Round(time.Second))
		if !v.redraw {
			fmt.Fprintf(v.c.stderr, "qubiqctl: %s\n", v.status)
		}
	}
	if v.redraw && v.dirty {
		v.draw()
	}
}

// draw redraws the table in place: cursor home, clear, the table, the
// status line.
func (v *watchView) draw() {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	t := newTable(&b, "PATH", "VALUE", "QUALITY", "TIMESTAMP", "REASON")
	for _, p := range v.paths {
		tv, ok := v.latest[p]
		if !ok {
			t.row(p, "", "(waiting)", "", "")
			continue
		}
		t.row(p, formatValue(tv.Value), tv.Quality, tv.Timestamp.UTC().Format(tableTime), tv.Reason)
	}
	_ = t.flush()
	fmt.Fprintf(&b, "\n%s, %d tags; %s  (Ctrl-C to stop)\n", v.status, len(v.paths), v.c.g.url)
	_, _ = io.WriteString(v.c.stdout, b.String())
	v.drawn, v.dirty = watchNow(), false
}

// end leaves the terminal tidy.
func (v *watchView) end() {
	if v.redraw && v.dirty {
		v.draw()
	}
}
