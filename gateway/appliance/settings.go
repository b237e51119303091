package appliance

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/internal/yamlnode"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/systemd"
)

// Defaults of the firmware section (docs/appliance.md, "Daemon config").
const (
	DefaultConfirmAfter = 2 * time.Minute
	DefaultTrialTimeout = 10 * time.Minute
)

// Settings are the daemon config's firmware and log sections, resolved:
//
//	firmware:
//	  slots_root: /usr/lib/qubiq            # holds slots/a, slots/b, current
//	  trusted_keys: /etc/qubiq/trusted-firmware-keys
//	  max_size: 1GiB                        # largest bundle accepted
//	  confirm_after: 2m                     # healthy this long confirms a trial slot
//	  trial_timeout: 10m                    # not confirmed by then: exit, systemd restarts
//	  max_backup: 64GiB                     # largest backup a restore accepts
//	log:
//	  level: info                           # debug | info | warn | error (PUT /api/v1/log-level changes it)
//	  output: auto                          # auto (the journal under systemd) | journal | stderr
//
// Relative paths are relative to the config file.
type Settings struct {
	SlotsRoot    string
	TrustedKeys  string
	MaxSize      int64
	MaxBackup    int64
	ConfirmAfter time.Duration
	TrialTimeout time.Duration
	LogLevel     slog.Level
	LogOutput    string
}

type firmwareYAML struct {
	SlotsRoot    string          `yaml:"slots_root"`
	TrustedKeys  string          `yaml:"trusted_keys"`
	MaxSize      config.Size     `yaml:"max_size"`
	MaxBackup    config.Size     `yaml:"max_backup"`
	ConfirmAfter config.Duration `yaml:"confirm_after"`
	TrialTimeout config.Duration `yaml:"trial_timeout"`
}

type logYAML struct {
	Level  string `yaml:"level"`
	Output string `yaml:"output"`
}

// ParseSettings reads cfg's firmware and log sections, strictly (an unknown
// key is an error naming it), filling the defaults. Every problem is named
// in the error.
func ParseSettings(cfg *config.Daemon) (Settings, error) {
	var fw firmwareYAML
	var lg logYAML
	var errs []error
	present := func(n *yaml.Node) bool { return n.Kind != 0 && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null") }
	if present(&cfg.Firmware) {
		if err := yamlnode.DecodeStrict(&cfg.Firmware, &fw); err != nil {
			errs = append(errs, fmt.Errorf("%s: firmware: %w", cfg.File, err))
		}
	}
	if present(&cfg.Log) {
		if err := yamlnode.DecodeStrict(&cfg.Log, &lg); err != nil {
			errs = append(errs, fmt.Errorf("%s: log: %w", cfg.File, err))
		}
	}
	dir := filepath.Dir(cfg.File)
	abs := func(p, def string) string {
		if p == "" {
			return def
		}
		if !filepath.IsAbs(p) {
			return filepath.Join(dir, p)
		}
		return p
	}
	s := Settings{
		SlotsRoot:    abs(fw.SlotsRoot, slots.DefaultRoot),
		TrustedKeys:  abs(fw.TrustedKeys, firmware.DefaultTrustedKeys),
		MaxSize:      int64(fw.MaxSize),
		MaxBackup:    int64(fw.MaxBackup),
		ConfirmAfter: fw.ConfirmAfter.D(),
		TrialTimeout: fw.TrialTimeout.D(),
		LogOutput:    lg.Output,
	}
	def := func(v *time.Duration, d time.Duration, key string) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			errs = append(errs, fmt.Errorf("%s: firmware.%s: want a positive duration, got %s", cfg.File, key, *v))
		}
	}
	def(&s.ConfirmAfter, DefaultConfirmAfter, "confirm_after")
	def(&s.TrialTimeout, DefaultTrialTimeout, "trial_timeout")
	if s.TrialTimeout <= s.ConfirmAfter {
		errs = append(errs, fmt.Errorf("%s: firmware.trial_timeout %s must be longer than confirm_after %s", cfg.File, s.TrialTimeout, s.ConfirmAfter))
	}
	if s.MaxSize <= 0 {
		s.MaxSize = firmware.DefaultMaxSize
	}
	if s.MaxBackup <= 0 {
		s.MaxBackup = 64 << 30
	}
	if lg.Level != "" {
		l, err := systemd.ParseLevel(lg.Level)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: log.level: %w", cfg.File, err))
		}
		s.LogLevel = l
	}
	switch s.LogOutput {
	case "", systemd.OutputAuto, systemd.OutputJournal, systemd.OutputStderr:
	default:
		errs = append(errs, fmt.Errorf("%s: log.output %q: want auto, journal or stderr", cfg.File, s.LogOutput))
	}
	return s, errors.Join(errs...)
}

// Layout is the slots' layout: the slots root and the daemon's data dir
// (which holds slots.json).
func (s Settings) Layout(dataDir string) slots.Layout {
	return slots.Layout{Root: s.SlotsRoot, DataDir: dataDir}
}
