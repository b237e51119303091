package systemd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WatchdogOptions configures NewWatchdog. Zero fields take the defaults
// named on each.
type WatchdogOptions struct {
	// Interval is the watchdog timeout systemd enforces (WatchdogSec=). Zero
	// reads it from the environment (WatchdogInterval); the watchdog is off
	// when it is still zero. Pings go out every Interval/2.
	Interval time.Duration
	// MaxAge is how old a progress source's last mark may be before it
	// counts as stuck. Zero means Interval: a loop that did not complete one
	// round within a whole watchdog period is wedged.
	MaxAge time.Duration
	// CheckTimeout bounds each Check probe. Zero means Interval/4 (at most
	// 5 s): a probe that hangs counts as failed, never blocks the pings'
	// schedule past the deadline.
	CheckTimeout time.Duration
	// Logger receives one line when pings are withheld and one when they
	// resume; nil discards.
	Logger *slog.Logger
	// Notify sends the states; nil is the package's Notify (sd_notify).
	Notify func(states ...string) error
	// now is the clock (tests).
	now func() time.Time
}

// Watchdog feeds systemd's watchdog (WatchdogSec=) only while the daemon
// proves progress: every registered source must have made progress within
// MaxAge and every check must pass, else WATCHDOG=1 is withheld and STATUS=
// names the stuck source, so systemd restarts a wedged daemon (the
// watchdog proves progress; a plain ticker would hide a deadlock).
//
// Register sources before Run; registering later is safe too. The methods
// are safe for concurrent use.
type Watchdog struct {
	opts WatchdogOptions
	log  *slog.Logger

	mu      sync.Mutex
	sources []source

	withheld atomic.Bool
	pings    atomic.Int64
}

type source struct {
	name  string
	last  func() time.Time            // progress sources
	check func(context.Context) error // checks
}

// NewWatchdog returns a watchdog with no sources. With no interval
// configured (not under systemd, or WatchdogSec= unset) Run returns at once.
func NewWatchdog(opts WatchdogOptions) *Watchdog {
	if opts.Interval <= 0 {
		opts.Interval = WatchdogInterval()
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = opts.Interval
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = min(opts.Interval/4, 5*time.Second)
	}
	if opts.Notify == nil {
		opts.Notify = Notify
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watchdog{opts: opts, log: log}
}

// Enabled reports whether systemd asked for pings.
func (w *Watchdog) Enabled() bool { return w.opts.Interval > 0 }

// Interval is the watchdog timeout (0 when off).
func (w *Watchdog) Interval() time.Duration { return w.opts.Interval }

// Pings is the number of WATCHDOG=1 sent so far.
func (w *Watchdog) Pings() int64 { return w.pings.Load() }

// Progress is a progress source's handle: the loop it stands for calls Mark
// after each completed round (a scan, a served request, an idle tick of a
// loop that had nothing to do). Safe for concurrent use.
type Progress struct{ last atomic.Int64 }

// Mark records progress now.
func (p *Progress) Mark() { p.last.Store(time.Now().UnixNano()) }

// Last is the time of the last Mark (the zero time before the first).
func (p *Progress) Last() time.Time {
	n := p.last.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Progress registers a progress source named name (it appears in logs and
// STATUS=) and returns its handle, marked now: a loop has MaxAge from its
// registration to complete a first round.
func (w *Watchdog) Progress(name string) *Progress {
	p := &Progress{}
	p.Mark()
	w.ProgressFunc(name, p.Last)
	return p
}

// ProgressFunc registers a progress source whose last progress time last
// returns (for example the tag engine's time of the last completed scan).
// A source with nothing to do must still report progress (return now),
// or it will be taken for stuck.
func (w *Watchdog) ProgressFunc(name string, last func() time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sources = append(w.sources, source{name: name, last: last})
}

// Check registers an active probe (for the API: a request through its own
// listener, see HTTPCheck). It runs before each ping with CheckTimeout; an
// error, or no answer in time, withholds the ping.
func (w *Watchdog) Check(name string, check func(ctx context.Context) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sources = append(w.sources, source{name: name, check: check})
}

// HTTPCheck returns a Check probe that GETs url with client (nil: a client
// without proxies) and wants a 2xx or 503 answer: the handler chain
// answered, whatever the health it reports (a degraded appliance is alive;
// the watchdog is about wedged loops, not about devices being down).
func HTTPCheck(client *http.Client, url string) func(ctx context.Context) error {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// Healthy evaluates every source once: nil when all made progress within
// MaxAge and all checks passed, else an error naming each stuck source and
// why ("scan loops: no progress for 45s"). The checks run concurrently;
// each is bounded by CheckTimeout.
func (w *Watchdog) Healthy(ctx context.Context) error {
	w.mu.Lock()
	srcs := append([]source(nil), w.sources...)
	w.mu.Unlock()
	now := w.opts.now()
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		if s.last != nil {
			if age := now.Sub(s.last()); age > w.opts.MaxAge {
				errs[i] = fmt.Errorf("%s: no progress for %s (limit %s)", s.name, age.Round(time.Millisecond), w.opts.MaxAge)
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.runCheck(ctx, s)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runCheck runs one probe with the timeout; a probe that ignores its
// context is abandoned (its goroutine finishes whenever it returns).
func (w *Watchdog) runCheck(ctx context.Context, s source) error {
	cctx, cancel := context.WithTimeout(ctx, w.opts.CheckTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.check(cctx) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		return nil
	case <-cctx.Done():
		return fmt.Errorf("%s: no answer within %s", s.name, w.opts.CheckTimeout)
	}
}

// Run pings every Interval/2 while Healthy passes, until ctx ends (then it
// returns nil). When a ping is withheld it logs the reason and sets
// STATUS= to it once; when progress resumes it logs that and pings again.
// Without a watchdog interval it returns nil at once.
func (w *Watchdog) Run(ctx context.Context) error {
	if !w.Enabled() {
		return nil
	}
	t := time.NewTicker(w.opts.Interval / 2)
	defer t.Stop()
	for {
		w.tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *Watchdog) tick(ctx context.Context) {
	err := w.Healthy(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		if !w.withheld.Swap(true) {
			reason := strings.ReplaceAll(err.Error(), "\n", "; ")
			w.log.Error("watchdog ping withheld: no progress; systemd restarts the daemon if this lasts", slog.String("reason", reason), slog.Duration("watchdog", w.opts.Interval))
			_ = w.opts.Notify(statusState("watchdog withheld: " + reason))
		}
		return
	}
	if w.withheld.Swap(false) {
		w.log.Info("watchdog: progress resumed, pings resume")
		_ = w.opts.Notify(statusState("running"))
	}
	if w.opts.Notify(StateWatchdog) == nil {
		w.pings.Add(1)
	}
}

// Sources lists the registered sources' names, sorted (for health output).
func (w *Watchdog) Sources() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.sources {
		out = append(out, s.name)
	}
	sort.Strings(out)
	return out
}

// RunWatchdog keeps the older single-function form: one check, alive,
// given the watchdog interval as the age limit, from the environment's
// interval. It blocks until ctx ends (at once without a watchdog).
func RunWatchdog(ctx context.Context, alive func(maxAge time.Duration) error, log *slog.Logger) {
	w := NewWatchdog(WatchdogOptions{Logger: log})
	w.Check("daemon", func(context.Context) error { return alive(w.Interval()) })
	_ = w.Run(ctx)
}
