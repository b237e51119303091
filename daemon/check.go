package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"qubiq.dev/edge/alarm"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/api/liveview"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/gateway/appliance"
	"qubiq.dev/edge/gateway/service"
	"qubiq.dev/edge/opcuastore"
)

// Check validates the config file and its project without opening the store
// or any device, by asking each part to check its own sections: the config
// (config.LoadDaemon, with the listener's TLS; the alarm settings; the
// firmware and log sections), the
// project's keys and its
// sections this daemon does not implement (config.ParseProject), the
// service layer's (devices and their drivers, tags against their drivers,
// scripts, connections, named queries, message handlers, history, seed
// users, alarms), LiveView's (views) and the flow engine's (flows). It returns every error found in one run,
// each naming the file and, where known, the line.
//
// The warnings a start would raise about the config (a block no part acts
// on, a worker limit turned off: docs/config.md, "Warnings") are logged to
// log at level WARN, so a check says them before the daemon runs.
func Check(path string, log *slog.Logger) error {
	cfg, cerr := config.LoadDaemon(path)
	if cfg == nil {
		return cerr
	}
	if cerr == nil { // of a config with problems, its unknown keys would be warned about as blocks
		for _, w := range configWarnings(cfg, builtParts) {
			log.Warn(w)
		}
	}
	if py := cfg.Python.Path; py != "" {
		// Not an error: the daemon starts without its interpreter, with
		// the sandbox degraded (docs/scripting.md), but a check that passes
		// should say so.
		if _, err := os.Stat(py); err != nil {
			log.Warn(fmt.Sprintf("python.path %s (or PYTHON_PATH): %v: the daemon would start with every script run failing as runtime_missing", py, err))
		}
	}
	serr := cerr // a config with problems is still checked with its project: every problem in one run
	if _, err := alarm.ParseSettings(&cfg.Alarms); err != nil {
		serr = errors.Join(serr, fmt.Errorf("%s: %w", cfg.File, err))
	}
	if _, err := appliance.ParseSettings(cfg); err != nil {
		serr = errors.Join(serr, err)
	}
	if cfg.Project == "" { // the mqtt: block is the config's, checked with or without a project
		return errors.Join(serr, checkMQTT(cfg)(&config.Project{}))
	}
	p, perr := config.LoadProject(cfg.Project)
	if p == nil {
		return errors.Join(serr, perr)
	}
	return errors.Join(serr, perr, service.CheckProject(p, opcuastore.Defaults(cfg.DataDir), log), checkViews(p), checkFlows(cfg)(p), checkMQTT(cfg)(p))
}

// checkViews checks the project's views as LiveView parses them.
func checkViews(p *config.Project) error {
	_, err := parseViews(p)
	return err
}

// parseViews parses the project's views (api/liveview's shape) against its
// tags (their units, types, descriptions and devices) and the entries each script lets a panel start; the
// error names the file, the view and the line.
func parseViews(p *config.Project) ([]apitypes.View, error) {
	lp := liveview.Project{Tags: map[string]liveview.Tag{}, Entries: map[string][]string{}}
	for _, t := range p.Tags {
		lp.Tags[t.Path] = liveview.Tag{Units: t.Units, Type: t.Type, Description: t.Description, Device: t.Device}
	}
	for _, sc := range p.Scripts {
		lp.Entries[sc.Module] = append([]string{}, sc.LiveView...)
	}
	views, err := liveview.Parse(p.Views, lp)
	if err != nil {
		return nil, fmt.Errorf("%s: views: %w", p.File, err)
	}
	return views, nil
}
