package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/gateway/appliance"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/systemd"
	"qubiq.dev/edge/tagengine"
)

// exitRestart is qubiqd's exit status when it stops to be restarted: a
// firmware bundle or a backup was staged, and qubiq-slot (for a bundle)
// or the next start (for a restore) applies it. The unit restarts on it
// (RestartForceExitStatus=75; EX_TEMPFAIL of sysexits.h).
const exitRestart = 75

// restartError is Run's error when the daemon stopped to be restarted; its
// RestartExitCode is the status qubiqd exits with.
type restartError struct{ reason string }

// Error names the reason of the restart.
func (e *restartError) Error() string { return "restart requested: " + e.reason }

// RestartExitCode is exitRestart: cmd/qubiqd exits with it.
func (e *restartError) RestartExitCode() int { return exitRestart }

// applyRestore is the first part: a backup staged by POST /api/v1/restore
// is restored into the data directory before the store opens.
func (s *System) applyRestore(ctx context.Context) error {
	_, err := appliance.ApplyPendingRestore(ctx, s.cfg.DataDir, s.settings, s.log.With("subsystem", "restore"))
	return err
}

// buildAppliance builds the appliance's operations (flash, slots, backup,
// restore, log level) over the store and the audit log.
func (s *System) buildAppliance(context.Context) error {
	s.restart = make(chan string, 1)
	s.appliance = appliance.New(appliance.Options{
		Settings: s.settings, DataDir: s.cfg.DataDir, ApplianceID: s.cfg.ApplianceID, Version: Version,
		ProjectFile: s.cfg.Project, Project: s.svc.Project, Store: s.db, Audit: s.svc, Level: s.level,
		Log: s.log.With("subsystem", "appliance"),
		Restart: func(reason string) {
			select {
			case s.restart <- reason:
			default:
			}
		},
	})
	return nil
}

// explainStore turns a store the running firmware's schema does not know
// into the slot agent's explanation of what to do (slots.SchemaError),
// also for a daemon whose slot manifest names no schema or that runs
// outside the slots: it knows store.SchemaVersion.
func (s *System) explainStore(err error) error {
	if !errors.Is(err, store.ErrSchemaTooNew) {
		return err
	}
	l := s.settings.Layout(s.cfg.DataDir)
	if e := slots.ExplainStoreError(l, err); e != err {
		return e
	}
	v, verr := store.FileSchemaVersion(l.StorePath(), time.Second)
	if verr != nil {
		return err
	}
	slot, serr := slots.SlotOfExecutable(l)
	if serr != nil {
		slot = "none"
	}
	se := &slots.SchemaError{Slot: slot, Version: Version, Store: v, Knows: store.SchemaVersion}
	for _, x := range []string{slots.A, slots.B} {
		if _, serr := os.Stat(l.SnapshotPath(x)); serr == nil {
			se.Snapshot = l.SnapshotPath(x)
		}
	}
	return fmt.Errorf("%w (%w)", se, err)
}

// watchdog builds the systemd watchdog over the scan loops' progress and
// an answer of the API through its own listener (systemd.Watchdog).
func (s *System) watchdog() *systemd.Watchdog {
	iv := systemd.WatchdogInterval()
	maxAge := iv
	if maxAge <= 0 {
		maxAge = 30 * time.Second // no watchdog: the trial's health check still uses the sources
	}
	wd := systemd.NewWatchdog(systemd.WatchdogOptions{Interval: iv, MaxAge: maxAge, CheckTimeout: min(maxAge/4, 5*time.Second),
		Logger: s.log.With("subsystem", "watchdog")})
	wd.ProgressFunc("scan loops", s.scanProgress)
	scheme, client := "http", &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if s.tlsOn {
		// The daemon asks itself through loopback: its own certificate
		// need not be verified (the handler chain answering is the proof).
		scheme = "https"
		client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a self-probe
	}
	wd.Check("api", systemd.HTTPCheck(client, scheme+"://"+s.ln.Addr().String()+"/api/v1/health"))
	return wd
}

// scanProgress is the scan loops' progress source: the tag engine's last
// completed scan, moved forward by the longest scan period of the project,
// so a loop that scans once a minute is not taken for stuck between its
// scans while the window stays the watchdog's (systemd.Watchdog's MaxAge).
// A project without polled tags has nothing to wedge: it is always now.
func (s *System) scanProgress() time.Time {
	eng := s.svc.Engine()
	longest := longestScan(s.svc.TagScans())
	if eng == nil || longest == 0 {
		return time.Now()
	}
	return eng.Progress().Add(longest)
}

// longestScan is the longest of the tags' scan periods (the project's
// "scan" values; absent is tagengine.DefaultScan; "0" or a bad value
// counts for nothing).
func longestScan(scans []string) time.Duration {
	var longest time.Duration
	for _, sc := range scans {
		d := tagengine.DefaultScan
		if sc != "" {
			var err error
			if d, err = time.ParseDuration(sc); err != nil {
				continue
			}
		}
		longest = max(longest, d)
	}
	return longest
}

// statusLine is the one-line STATUS= summary.
func (s *System) statusLine() string {
	slot := s.appliance.Slot()
	if slot == "" {
		slot = "none"
	}
	if st, err := slots.Load(s.appliance.Layout()); err == nil && st.Trial && st.Active == slot {
		slot += fmt.Sprintf(" on trial (start %d of %d)", st.BootCount, st.BootLimit)
	}
	h := s.svc.Health(context.Background())
	return fmt.Sprintf("%s: %d tags, %d devices, API on %s, slot %s, version %s", h.Status, s.svc.TagCount(), len(h.Devices),
		s.ln.Addr(), slot, Version)
}

// runTrial confirms the slot the daemon runs from when it is on trial,
// after firmware.confirm_after of health (slots.RunTrial): the health
// report "ok" and every watchdog source making progress. It sends the
// trial's failure on failed; after a confirmation STATUS= is refreshed.
func (s *System) runTrial(ctx context.Context, wd *systemd.Watchdog, failed chan<- error) {
	if s.appliance.Slot() == "" {
		return
	}
	err := slots.RunTrial(ctx, s.appliance.Layout(), slots.TrialOptions{
		ConfirmAfter: s.settings.ConfirmAfter, Timeout: s.settings.TrialTimeout, Slot: s.appliance.Slot(),
		Logger: s.log.With("subsystem", "slots"),
		Healthy: func(ctx context.Context) error {
			if h := s.svc.Health(ctx); h.Status != gateway.HealthOK {
				return fmt.Errorf("health %s: %v", h.Status, h.Reasons)
			}
			return wd.Healthy(ctx)
		},
	})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		failed <- err
	case ctx.Err() == nil:
		systemd.Status(s.statusLine()) // a confirmed trial is no longer "on trial"
	}
}
