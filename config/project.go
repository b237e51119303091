package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/internal/yamlnode"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// Project is the project file: devices, tags, scripts, and the sections
// each part of the daemon parses and validates itself (kept as YAML nodes
// for it: connections, named queries and message handlers for the data
// services, views for LiveView, users for the user store, alarms for the
// alarm engine). Flows are a section this daemon does not implement yet: a
// project that has entries in it is refused (NotImplementedSections),
// never kept as data nobody reads.
type Project struct {
	Devices         []DeviceConfig `yaml:"devices" json:"devices"`
	Tags            []TagConfig    `yaml:"tags" json:"tags"`
	Scripts         []ScriptConfig `yaml:"scripts" json:"scripts,omitempty"`
	Connections     []yaml.Node    `yaml:"connections" json:"-"`
	NamedQueries    []yaml.Node    `yaml:"named_queries" json:"-"`
	MessageHandlers []yaml.Node    `yaml:"message_handlers" json:"-"`
	Flows           []yaml.Node    `yaml:"flows" json:"-"`  // refused when not empty
	Alarms          []yaml.Node    `yaml:"alarms" json:"-"` // package alarm parses it (docs/alarms.md)
	Views           []yaml.Node    `yaml:"views" json:"-"`
	Users           []yaml.Node    `yaml:"users" json:"-"`

	// File is the path the project was read from; Dir its directory, against
	// which script files resolve.
	File string `yaml:"-" json:"-"`
}

// DeviceConfig is one device: its name, its driver and the driver's own keys
// (kept as JSON for the driver's strict decoder).
type DeviceConfig struct {
	Name   string          `json:"name"`
	Driver string          `json:"driver"`
	Raw    json.RawMessage `json:"config,omitempty"`
	Line   int             `json:"-"`
}

// UnmarshalYAML takes name and driver and keeps every other key for the
// driver.
func (d *DeviceConfig) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	d.Line = n.Line
	name, _ := m["name"].(string)
	drv, _ := m["driver"].(string)
	if name == "" {
		return fmt.Errorf("line %d: device without a name", n.Line)
	}
	if drv == "" {
		return fmt.Errorf("line %d: device %q without a driver", n.Line, name)
	}
	delete(m, "name")
	delete(m, "driver")
	d.Name, d.Driver = name, drv
	raw, err := json.Marshal(yamlnode.JSONable(m))
	if err != nil {
		return fmt.Errorf("line %d: device %q: %w", n.Line, name, err)
	}
	d.Raw = raw
	return nil
}

// TagConfig is one tag as written in the project file.
type TagConfig struct {
	Path        string        `yaml:"path" json:"path"`
	Device      string        `yaml:"device" json:"device"`
	Address     string        `yaml:"address" json:"address"`
	Type        string        `yaml:"type,omitempty" json:"type"`
	ByteOrder   string        `yaml:"byte_order,omitempty" json:"byte_order,omitempty"`
	Scan        string        `yaml:"scan,omitempty" json:"scan,omitempty"`
	Deadband    *DeadbandConf `yaml:"deadband,omitempty" json:"deadband,omitempty"`
	Scale       *ScaleConf    `yaml:"scale,omitempty" json:"scale,omitempty"`
	Units       string        `yaml:"units,omitempty" json:"units,omitempty"`
	WriteLevel  string        `yaml:"write_level,omitempty" json:"write_level,omitempty"`
	ReadOnly    bool          `yaml:"read_only,omitempty" json:"read_only,omitempty"`
	UnitID      int           `yaml:"unit_id,omitempty" json:"unit_id,omitempty"`
	Description string        `yaml:"description,omitempty" json:"description,omitempty"`
	History     *HistoryConf  `yaml:"history,omitempty" json:"history,omitempty"`
	Line        int           `yaml:"-" json:"-"`
}

// DeadbandConf is {absolute: x} or {percent: x}.
type DeadbandConf struct {
	Absolute float64 `yaml:"absolute,omitempty" json:"absolute,omitempty"`
	Percent  float64 `yaml:"percent,omitempty" json:"percent,omitempty"`
}

// ScaleConf is {factor, offset} or {raw: [lo, hi], eng: [lo, hi]}.
type ScaleConf struct {
	Factor *float64  `yaml:"factor,omitempty" json:"factor,omitempty"`
	Offset float64   `yaml:"offset,omitempty" json:"offset,omitempty"`
	Raw    []float64 `yaml:"raw,omitempty" json:"raw,omitempty"`
	Eng    []float64 `yaml:"eng,omitempty" json:"eng,omitempty"`
}

// HistoryConf is a tag's history recording policy (used by the history work).
type HistoryConf struct {
	Enabled     bool    `yaml:"enabled" json:"enabled"`
	Deadband    float64 `yaml:"deadband,omitempty" json:"deadband,omitempty"`
	MaxInterval string  `yaml:"max_interval,omitempty" json:"max_interval,omitempty"`
}

// ScriptConfig names a script module, the file holding its code (relative to
// the project file) and the entries a LiveView button may start.
type ScriptConfig struct {
	Module   string   `yaml:"module" json:"module"`
	File     string   `yaml:"file" json:"file"`
	LiveView []string `yaml:"liveview" json:"liveview,omitempty"`
}

// LoadProject reads and strictly decodes the project file at path. Tag
// lines are kept for error messages.
func LoadProject(path string) (*Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	p, err := ParseProject(b)
	if p != nil {
		p.File = abs
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w", abs, err)
	}
	return p, nil
}

// ParseProject strictly decodes a project document (YAML or JSON).
//
// When the only problems are unknown keys or values of the wrong YAML kind,
// the project is still returned (decoded leniently, without those keys)
// together with the error, so a caller such as --check-config can go on and
// report the remaining problems in the same run.
func ParseProject(b []byte) (*Project, error) {
	var p Project
	var strictErr error
	if err := decodeStrict(b, &p); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, err
		}
		strictErr = err
		p = Project{}
		if lerr := yaml.Unmarshal(b, &p); lerr != nil {
			var lte *yaml.TypeError
			if !errors.As(lerr, &lte) {
				return nil, err
			}
		}
	}
	// Recover line numbers of tags for messages; refuse the sections this
	// daemon does not implement.
	var root yaml.Node
	var notImpl []error
	if err := yaml.Unmarshal(b, &root); err == nil && len(root.Content) > 0 {
		top := root.Content[0]
		for i := 0; i+1 < len(top.Content); i += 2 {
			k, v := top.Content[i], top.Content[i+1]
			if k.Value == "tags" {
				for j, n := range v.Content {
					if j < len(p.Tags) {
						p.Tags[j].Line = n.Line
					}
				}
			}
			if why, ok := NotImplementedSections[k.Value]; ok && len(v.Content) > 0 {
				notImpl = append(notImpl, fmt.Errorf("line %d: section %q: %s; remove it (this qubiqd would not run it)", k.Line, k.Value, why))
			}
		}
	}
	p.Flows = nil
	if len(notImpl) > 0 {
		return &p, errors.Join(append([]error{strictErr}, notImpl...)...)
	}
	return &p, strictErr
}

// NotImplementedSections are the project sections this daemon does not
// implement yet, with why: a project with entries in one is refused by
// ParseProject (an empty list is accepted), so nothing the project names
// is silently not run.
var NotImplementedSections = map[string]string{
	"flows": "flows (triggers, Python nodes, outputs) are not implemented by this version",
}

// Tags converts the tag configs into engine tags. Every bad tag is reported
// (file, line, path, and what is wrong); nothing is half-converted: on error
// the tag list is nil.
func (p *Project) EngineTags() ([]tagengine.Tag, error) {
	var errs []error
	var out []tagengine.Tag
	for _, tc := range p.Tags {
		t, err := tc.engineTag()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: tag %q: %w", p.File, tc.Line, tc.Path, err))
			continue
		}
		out = append(out, t)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (tc TagConfig) engineTag() (tagengine.Tag, error) {
	var errs []error
	t := tagengine.Tag{Path: tc.Path, Device: tc.Device, Units: tc.Units, ReadOnly: tc.ReadOnly, Description: tc.Description}
	if tc.Path == "" {
		errs = append(errs, errors.New("missing path"))
	} else if !tagengine.ValidPath(tc.Path) {
		errs = append(errs, errors.New("invalid path (segments of letters, digits, _ - . and space, separated by /)"))
	}
	if tc.Device == "" {
		errs = append(errs, errors.New("missing device"))
	}
	typ := value.Float64
	if tc.Type != "" {
		var err error
		if typ, err = value.ParseType(tc.Type); err != nil {
			errs = append(errs, err)
		}
	}
	t.Point = device.Point{Tag: tc.Path, Address: tc.Address, Type: typ, ByteOrder: tc.ByteOrder, UnitID: tc.UnitID}
	switch tc.ByteOrder {
	case "", "ABCD", "CDAB", "BADC", "DCBA":
	default:
		errs = append(errs, fmt.Errorf("byte_order %q: want ABCD, CDAB, BADC or DCBA", tc.ByteOrder))
	}
	if tc.Scan != "" {
		d, err := ParseDuration(tc.Scan)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("scan %q: want a positive duration such as 1s", tc.Scan))
		}
		t.Scan = d
	}
	if tc.Scan == "" {
		t.Scan = tagengine.DefaultScan
	}
	if t.Scan > 0 && t.Scan < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("scan %q: shorter than 10ms", tc.Scan))
	}
	if tc.WriteLevel != "" {
		l, err := auth.ParseLevel(tc.WriteLevel)
		if err != nil {
			errs = append(errs, err)
		}
		t.WriteLevel = l
	}
	if tc.Deadband != nil {
		if tc.Deadband.Absolute < 0 || tc.Deadband.Percent < 0 {
			errs = append(errs, errors.New("deadband must not be negative"))
		}
		t.Deadband = tagengine.Deadband{Absolute: tc.Deadband.Absolute, Percent: tc.Deadband.Percent}
	}
	if s := tc.Scale; s != nil {
		switch {
		case len(s.Raw) > 0 || len(s.Eng) > 0:
			if len(s.Raw) != 2 || len(s.Eng) != 2 || s.Factor != nil {
				errs = append(errs, errors.New("scale: want {raw: [lo, hi], eng: [lo, hi]} or {factor, offset}"))
				break
			}
			sc, err := tagengine.ScaleFromRanges(s.Raw[0], s.Raw[1], s.Eng[0], s.Eng[1])
			if err != nil {
				errs = append(errs, err)
			}
			t.Scale = sc
		default:
			f := 1.0
			if s.Factor != nil {
				f = *s.Factor
			}
			if f == 0 {
				errs = append(errs, errors.New("scale: factor must not be 0"))
			}
			t.Scale = tagengine.Scale{Factor: f, Offset: s.Offset}
		}
	}
	if len(errs) > 0 {
		return tagengine.Tag{}, errors.Join(errs...)
	}
	return t, nil
}

// TagPoint returns the driver's view of a tag config (address, type, byte
// order, unit id), or the error EngineTags would report for its type.
func TagPoint(tc TagConfig) (device.Point, error) {
	typ := value.Float64
	if tc.Type != "" {
		var err error
		if typ, err = value.ParseType(tc.Type); err != nil {
			return device.Point{}, err
		}
	}
	return device.Point{Tag: tc.Path, Address: tc.Address, Type: typ, ByteOrder: tc.ByteOrder, UnitID: tc.UnitID}, nil
}

// ScriptFile returns the absolute path of a script's file.
func (p *Project) ScriptFile(s ScriptConfig) string {
	return resolve(filepath.Dir(p.File), s.File)
}
