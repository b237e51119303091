package systemd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// Log outputs for LogOptions.Output.
const (
	// OutputAuto writes to the journal when stderr is connected to it (the
	// process runs under systemd: $JOURNAL_STREAM matches stderr) and the
	// journal socket is there; else text on stderr.
	OutputAuto = "auto"
	// OutputJournal writes to the journal's native socket; records that
	// cannot be sent go to stderr as text.
	OutputJournal = "journal"
	// OutputStderr writes slog's text format to stderr.
	OutputStderr = "stderr"
)

// LogOptions configures NewLogHandler.
type LogOptions struct {
	// Level is the minimum level; a *slog.LevelVar lets the API change it
	// at run time (the change applies to the next record). Nil is Info.
	Level slog.Leveler
	// Output is OutputAuto (""), OutputJournal or OutputStderr.
	Output string
	// Stderr is where text goes (nil: os.Stderr).
	Stderr io.Writer
	// Identifier is SYSLOG_IDENTIFIER (journalctl -t); "" is "qubiqd".
	Identifier string
	// AddSource adds CODE_FILE, CODE_LINE and CODE_FUNC (journal) or
	// source= (text).
	AddSource bool

	send func(msg string, p journal.Priority, vars map[string]string) error
}

// NewLogHandler returns the daemon's slog handler: the journal (with
// priorities and structured fields, see JournalHandler) or text on stderr,
// as opts.Output says. It returns an error for an unknown Output.
func NewLogHandler(opts LogOptions) (slog.Handler, error) {
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	text := slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: opts.Level, AddSource: opts.AddSource})
	switch opts.Output {
	case "", OutputAuto:
		if ok, _ := journal.StderrIsJournalStream(); ok && journal.Enabled() {
			return NewJournalHandler(opts, text), nil
		}
		return text, nil
	case OutputJournal:
		return NewJournalHandler(opts, text), nil
	case OutputStderr:
		return text, nil
	}
	return nil, fmt.Errorf("systemd: log output %q: want auto, journal or stderr", opts.Output)
}

// JournalHandler is a slog.Handler writing each record to the systemd
// journal through its native protocol (journal.Send): MESSAGE is the
// record's message, PRIORITY its level mapped to syslog's (Priority), and
// every attribute a field of its own, named by FieldName (groups joined
// with "_": device=plc1 is DEVICE=plc1, group http's status is
// HTTP_STATUS), so `journalctl -u qubiqd DEVICE=plc1` filters by it. Each
// record also carries SYSLOG_IDENTIFIER and SLOG_LEVEL (slog's level name).
//
// A record the journal refuses goes to the fallback handler instead (text
// on stderr, which systemd also collects), so nothing is lost silently;
// Failures counts them.
type JournalHandler struct {
	opts     LogOptions
	fallback slog.Handler
	prefix   string            // group prefix for attrs added later
	fields   map[string]string // fields from WithAttrs, already named
	failures *atomic.Int64
	failOnce *sync.Once
}

// NewJournalHandler returns a journal handler with fallback for records
// the journal refuses (nil: text on opts.Stderr or os.Stderr).
func NewJournalHandler(opts LogOptions, fallback slog.Handler) *JournalHandler {
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	if opts.Identifier == "" {
		opts.Identifier = "qubiqd"
	}
	if opts.send == nil {
		opts.send = journal.Send
	}
	if fallback == nil {
		w := opts.Stderr
		if w == nil {
			w = os.Stderr
		}
		fallback = slog.NewTextHandler(w, &slog.HandlerOptions{Level: opts.Level, AddSource: opts.AddSource})
	}
	return &JournalHandler{opts: opts, fallback: fallback, fields: map[string]string{},
		failures: new(atomic.Int64), failOnce: new(sync.Once)}
}

// Enabled reports whether level is at or above the handler's level.
func (h *JournalHandler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.opts.Level.Level()
}

// Failures is the number of records the journal refused (sent to the
// fallback instead).
func (h *JournalHandler) Failures() int64 { return h.failures.Load() }

// Priority maps a slog level to the journal's syslog priority: Debug →
// debug (7), Info → info (6), Info+2 → notice (5), Warn → warning (4),
// Error → err (3), Error+4 and above → crit (2). Levels between take the
// lower neighbour's priority.
func Priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError+4:
		return journal.PriCrit
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo+2:
		return journal.PriNotice
	case l >= slog.LevelInfo:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// Handle sends r to the journal.
func (h *JournalHandler) Handle(ctx context.Context, r slog.Record) error {
	vars := make(map[string]string, len(h.fields)+r.NumAttrs()+5)
	for k, v := range h.fields {
		vars[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(vars, h.prefix, a)
		return true
	})
	vars["SYSLOG_IDENTIFIER"] = h.opts.Identifier
	vars["SLOG_LEVEL"] = r.Level.String()
	if !r.Time.IsZero() {
		// The journal stamps its own receive time; this is the record's.
		vars["SLOG_TIME"] = r.Time.UTC().Format(time.RFC3339Nano)
	}
	if h.opts.AddSource && r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		vars["CODE_FILE"], vars["CODE_LINE"], vars["CODE_FUNC"] = f.File, strconv.Itoa(f.Line), f.Function
	}
	if err := h.opts.send(r.Message, Priority(r.Level), vars); err != nil {
		h.failures.Add(1)
		h.failOnce.Do(func() {
			fr := slog.NewRecord(time.Now(), slog.LevelError, "journal refused a record; logging to stderr", 0)
			fr.AddAttrs(slog.Any("err", err))
			_ = h.fallback.Handle(ctx, fr)
		})
		return h.fallback.Handle(ctx, r)
	}
	return nil
}

// WithAttrs returns a handler whose records carry attrs as fields.
func (h *JournalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.fields = make(map[string]string, len(h.fields)+len(attrs))
	for k, v := range h.fields {
		c.fields[k] = v
	}
	for _, a := range attrs {
		addAttr(c.fields, h.prefix, a)
	}
	c.fallback = h.fallback.WithAttrs(attrs)
	return &c
}

// WithGroup returns a handler that prefixes later attributes' field names
// with name and "_".
func (h *JournalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "_"
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

func addAttr(vars map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "_"
		}
		for _, g := range v.Group() {
			addAttr(vars, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	var s string
	switch v.Kind() {
	case slog.KindTime:
		s = v.Time().UTC().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = v.String()
		}
	default:
		s = v.String()
	}
	vars[FieldName(prefix+a.Key)] = s
}

// FieldName turns an attribute key into a journal field name, which must be
// upper-case ASCII letters, digits and "_", not start with "_" (those are
// the journal's trusted fields) or a digit, and be at most 64 bytes
// (systemd.journal-fields(7)): letters are upper-cased, any other byte
// becomes "_", leading "_" are dropped, a leading digit gets "F_" in
// front; a key left empty is "FIELD".
func FieldName(key string) string {
	b := make([]byte, 0, len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	s := strings.TrimLeft(string(b), "_")
	if s == "" {
		return "FIELD"
	}
	if s[0] >= '0' && s[0] <= '9' {
		s = "F_" + s
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// NewLogger is NewLogHandler with a level the caller can change at run
// time: it returns the logger and its *slog.LevelVar (set to level), which
// the API's log-level route sets (Level.Set) for every later record.
func NewLogger(level slog.Level, opts LogOptions) (*slog.Logger, *slog.LevelVar, error) {
	lv := new(slog.LevelVar)
	lv.Set(level)
	opts.Level = lv
	h, err := NewLogHandler(opts)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(h), lv, nil
}

// ParseLevel reads a level name as the API and --log-level take it:
// debug, info, warn, error (any case), or slog's offsets such as "warn+2".
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
