package slots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrTrialTimeout is returned by RunTrial when the trial slot did not stay
// healthy for ConfirmAfter within Timeout. The daemon then exits with a
// failure, systemd restarts it, and qubiq-slot counts the start (and rolls
// back once the boot limit is passed).
var ErrTrialTimeout = errors.New("trial slot not confirmed healthy in time")

// TrialOptions configures RunTrial. Zero durations take the defaults named.
type TrialOptions struct {
	// ConfirmAfter is how long the daemon must be healthy without a break
	// before the trial is confirmed (default 2 min: long enough for the
	// scan loops, the API and the workers to have run, as Kura's
	// deployment verification waits before it accepts a package).
	ConfirmAfter time.Duration
	// Timeout ends the trial attempt without confirmation (default 10 min).
	Timeout time.Duration
	// Poll is how often Healthy is asked (default ConfirmAfter/10, at least
	// 50 ms).
	Poll time.Duration
	// Healthy reports the daemon's health: nil when /api/v1/health would
	// say "ok" and the watchdog's sources show progress.
	Healthy func(ctx context.Context) error
	// Slot is the slot the daemon runs from; "" finds it from the
	// executable's path (SlotOfExecutable).
	Slot   string
	Logger *slog.Logger
}

// RunTrial is what the daemon runs once it is up (the confirm-after-healthy
// hook): when its slot is on trial it waits until Healthy has passed
// without a break for ConfirmAfter and then confirms the slot (Confirm),
// returning nil. It returns nil at once when the slot is not on trial, nil
// when ctx ends first, and ErrTrialTimeout (with the last health error)
// when Timeout passes without a confirmation: the daemon should then exit
// non-zero.
func RunTrial(ctx context.Context, l Layout, opts TrialOptions) error {
	if opts.ConfirmAfter <= 0 {
		opts.ConfirmAfter = 2 * time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = max(opts.ConfirmAfter/10, 50*time.Millisecond)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Healthy == nil {
		return errors.New("slots: RunTrial without a Healthy function")
	}
	slot := opts.Slot
	if slot == "" {
		var err error
		if slot, err = SlotOfExecutable(l); err != nil {
			log.Info("not running from a firmware slot: no trial to confirm", slog.Any("reason", err))
			return nil
		}
	}
	st, err := Load(l)
	if err != nil {
		return err
	}
	if !st.Trial || st.Active != slot {
		return nil
	}
	log.Info("firmware slot on trial: confirming after a healthy period", slog.String("slot", slot),
		slog.Int("start", st.BootCount), slog.Int("of", st.BootLimit), slog.Duration("confirm_after", opts.ConfirmAfter))
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	var since time.Time
	var lastErr error
	for {
		if err := opts.Healthy(ctx); err != nil {
			since, lastErr = time.Time{}, err
		} else if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) >= opts.ConfirmAfter {
			ok, err := Confirm(l, slot)
			if err != nil {
				return err
			}
			if ok {
				log.Info("firmware slot confirmed healthy", slog.String("slot", slot))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return fmt.Errorf("%w: slot %s, last health: %v", ErrTrialTimeout, slot, lastErr)
		case <-tick.C:
		}
	}
}
