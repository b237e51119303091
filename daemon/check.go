package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
)

// Check validates the config file and its project without opening the store
// or any device: config keys, project keys, drivers and their configs, tag
// paths and addresses against their drivers, script files and the entries
// LiveView may start, views, and the data sections. It returns every error
// found in one run, each naming the file and, where known, the line.
func Check(path string, log *slog.Logger) error {
	cfg, err := config.LoadDaemon(path)
	if err != nil {
		return err
	}
	if cfg.Project == "" {
		return nil
	}
	p, perr := config.LoadProject(cfg.Project)
	if p == nil {
		return perr
	}
	return errors.Join(perr, checkProject(p, cfg.DataDir, log))
}

func checkProject(p *config.Project, dataDir string, log *slog.Logger) error {
	devs, derr := BuildDevices(p, dataDir, log)
	_, terr := p.EngineTags()
	_, verr := ParseViews(p.Views, p.Tags, p.Scripts, p.File)
	return errors.Join(derr, terr, checkTags(p, devs), checkScripts(p), verr, CheckData(p), checkUsers(p))
}

// checkTags checks what the engine would refuse, with the tag's line: a
// path defined twice, a device the project lacks, an address its driver
// cannot parse. Tags of devices that failed to build are not checked again.
func checkTags(p *config.Project, devs map[string]device.Driver) error {
	var errs []error
	seen := map[string]int{}
	known := map[string]bool{}
	for _, d := range p.Devices {
		known[d.Name] = true
	}
	for _, tc := range p.Tags {
		at := fmt.Sprintf("%s:%d: tag %q", p.File, tc.Line, tc.Path)
		if first, dup := seen[tc.Path]; dup {
			errs = append(errs, fmt.Errorf("%s: defined twice (first at line %d)", at, first))
			continue
		}
		seen[tc.Path] = tc.Line
		if !known[tc.Device] {
			errs = append(errs, fmt.Errorf("%s: unknown device %q", at, tc.Device))
			continue
		}
		drv, ok := devs[tc.Device]
		if !ok {
			continue
		}
		if err := config.CheckTagOnDevice(tc, drv); err != nil { // the address too when the type is bad
			errs = append(errs, fmt.Errorf("%s: device %q: %w", at, tc.Device, err))
		}
	}
	return errors.Join(errs...)
}

var topDefRe = regexp.MustCompile(`(?m)^def\s+([A-Za-z][A-Za-z0-9_]*)\s*\(`)

// checkScripts checks that each script file exists and defines, at top
// level, every entry its liveview list names.
func checkScripts(p *config.Project) error {
	var errs []error
	for _, s := range p.Scripts {
		file := p.ScriptFile(s)
		code, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: script %q: %w", p.File, s.Module, err))
			continue
		}
		defs := map[string]bool{}
		for _, m := range topDefRe.FindAllStringSubmatch(string(code), -1) {
			defs[m[1]] = true
		}
		for _, e := range s.LiveView {
			if !defs[e] {
				errs = append(errs, fmt.Errorf("%s: script %q: liveview entry %q is not a top-level function of %s", p.File, s.Module, e, file))
			}
		}
	}
	return errors.Join(errs...)
}
