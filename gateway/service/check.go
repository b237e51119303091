package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
)

// CheckProject validates the project sections the service owns, without
// opening anything: the devices (drivers and their configs, with defaults
// applied by defaults when not nil), the tags (converted, each against its
// driver), the script files and the entries LiveView may start, the data
// sections (connections, named queries, message handlers, tag history) and
// the seed users. Every problem is reported in one error, each naming the
// file and, where known, the line (qubiqd --check-config, project import).
func CheckProject(p *config.Project, defaults func(driver string, raw json.RawMessage) json.RawMessage, log *slog.Logger) error {
	devs, derr := BuildDevices(p, defaults, log)
	_, terr := p.EngineTags()
	return errors.Join(derr, terr, checkTags(p, devs), checkScripts(p), checkData(p), checkUsers(p), checkAlarms(p))
}

// BuildDevices makes a driver for every device of p and checks its config
// (defaults, when not nil, completes the driver keys first). Every error is
// reported, each naming the device and the line.
func BuildDevices(p *config.Project, defaults func(driver string, raw json.RawMessage) json.RawMessage, log *slog.Logger) (map[string]device.Driver, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	devs := map[string]device.Driver{}
	var errs []error
	for _, dc := range p.Devices {
		if _, dup := devs[dc.Name]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: device %q defined twice", p.File, dc.Line, dc.Name))
			continue
		}
		f, ok := device.Lookup(dc.Driver)
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: device %q: unknown driver %q (have %v)", p.File, dc.Line, dc.Name, dc.Driver, device.Drivers()))
			continue
		}
		raw := dc.Raw
		if defaults != nil {
			raw = defaults(dc.Driver, raw)
		}
		d, err := f(device.Config{Name: dc.Name, Raw: raw, Logger: log.With("device", dc.Name)})
		if err == nil {
			err = d.Validate()
		}
		if err != nil {
			// Drivers name their device in their own errors; say it once.
			msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("device %q: ", dc.Name))
			errs = append(errs, fmt.Errorf("%s:%d: device %q: %s", p.File, dc.LineOf(err), dc.Name, msg))
			continue
		}
		devs[dc.Name] = d
	}
	return devs, errors.Join(errs...)
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
