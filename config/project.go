package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/internal/yamlnode"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/tagpath"
	"qubiq.dev/edge/value"
)

// Project is the project file: devices, tags, scripts, and the sections
// each part of the daemon parses and validates itself (kept as YAML nodes
// for it: connections, named queries and message handlers for the data
// services, flows for the flow engine (package flow, docs/flows.md), views
// for LiveView, users for the user store, alarms for the alarm engine
// (package alarm, docs/alarms.md). Every section is parsed and checked by
// the part that owns it; none is kept as data nobody reads.
type Project struct {
	Devices         []DeviceConfig `yaml:"devices" json:"devices"`
	Tags            []TagConfig    `yaml:"tags" json:"tags"`
	Scripts         []ScriptConfig `yaml:"scripts" json:"scripts,omitempty"`
	Connections     []yaml.Node    `yaml:"connections" json:"-"`
	NamedQueries    []yaml.Node    `yaml:"named_queries" json:"-"`
	MessageHandlers []yaml.Node    `yaml:"message_handlers" json:"-"`
	Flows           []yaml.Node    `yaml:"flows" json:"-"`  // parsed and checked by package flow
	Alarms          []yaml.Node    `yaml:"alarms" json:"-"` // package alarm parses it (docs/alarms.md)
	Views           []yaml.Node    `yaml:"views" json:"-"`
	Users           []yaml.Node    `yaml:"users" json:"-"`
	// MQTTPublish is the tag publishing of the supervisor link
	// (docs/mqtt.md); the mqtt part parses it.
	MQTTPublish yaml.Node `yaml:"mqtt_publish" json:"-"`

	// File is the path the project was read from; Dir its directory, against
	// which script files resolve.
	File string `yaml:"-" json:"-"`
}

// DeviceConfig is one device: its name, its driver and the driver's own keys
// (kept as JSON for the driver's strict decoder). KeyLines holds the line
// of each key, so that a driver's complaint about a key is reported at
// that key's line (LineOf).
type DeviceConfig struct {
	Name     string          `json:"name"`
	Driver   string          `json:"driver"`
	Raw      json.RawMessage `json:"config,omitempty"`
	Line     int             `json:"-"`
	KeyLines map[string]int  `json:"-"`
}

// UnmarshalYAML takes name and driver and keeps every other key for the
// driver.
func (d *DeviceConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a device mapping {name, driver, ...}, got %s", n.Line, got(n))
	}
	d.Line = n.Line
	d.KeyLines = make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		d.KeyLines[n.Content[i].Value] = n.Content[i].Line
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return fmt.Errorf("line %d: device: %v", n.Line, err)
	}
	name, _ := m["name"].(string)
	drv, _ := m["driver"].(string)
	if name == "" {
		return fmt.Errorf("line %d: device without a name", n.Line)
	}
	if len(name) > MaxDeviceName {
		return fmt.Errorf("line %d: device name of %d bytes is over the limit of %d (docs/limits.md)", n.Line, len(name), MaxDeviceName)
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

// LineOf returns the line a driver's error about d is best reported at:
// the line of the key a *device.KeyError names, else the device's line.
func (d DeviceConfig) LineOf(err error) int {
	var ke *device.KeyError
	if errors.As(err, &ke) {
		if l, ok := d.KeyLines[strings.SplitN(ke.Key, ".", 2)[0]]; ok {
			return l
		}
	}
	return d.Line
}

// TagConfig is one tag as written in the project file (docs/project.md, Project
// file; docs/values.md). Optional numbers are pointers: a key written as 0
// (unit_id: 0, offset: 0, deadband: {absolute: 0}) is kept apart from an
// absent one, in the project file, the tag CSV and the export alike.
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
	UnitID      *int          `yaml:"unit_id,omitempty" json:"unit_id,omitempty"`
	Description string        `yaml:"description,omitempty" json:"description,omitempty"`
	History     *HistoryConf  `yaml:"history,omitempty" json:"history,omitempty"`
	// NonFinite is "bad" (the default: a NaN or ±Inf reading is
	// Bad_OutOfRange) or "pass" (kept, as Uncertain).
	NonFinite string `yaml:"non_finite,omitempty" json:"non_finite,omitempty"`
	// StringByteOrder ("high", the default, or "low") and Encoding
	// ("utf8", the default, "ascii" or "latin1") are a register string's.
	StringByteOrder string `yaml:"string_byte_order,omitempty" json:"string_byte_order,omitempty"`
	Encoding        string `yaml:"encoding,omitempty" json:"encoding,omitempty"`
	// Min and Max are the engineering limits of writes (docs/project.md,
	// "Limits"): numbers, min <= max, on numeric (and OPC UA auto) tags.
	Min  *float64 `yaml:"min,omitempty" json:"min,omitempty"`
	Max  *float64 `yaml:"max,omitempty" json:"max,omitempty"`
	Line int      `yaml:"-" json:"-"`
}

// DeadbandConf is {absolute: x} or {percent: x}.
type DeadbandConf struct {
	Absolute *float64 `yaml:"absolute,omitempty" json:"absolute,omitempty"`
	Percent  *float64 `yaml:"percent,omitempty" json:"percent,omitempty"`
}

// ScaleConf is {factor, offset} or {raw: [lo, hi], eng: [lo, hi]}.
type ScaleConf struct {
	Factor *float64  `yaml:"factor,omitempty" json:"factor,omitempty"`
	Offset *float64  `yaml:"offset,omitempty" json:"offset,omitempty"`
	Raw    []float64 `yaml:"raw,omitempty" json:"raw,omitempty"`
	Eng    []float64 `yaml:"eng,omitempty" json:"eng,omitempty"`
}

// HistoryConf is a tag's history recording policy (tagengine.HistoryPolicy):
// recorded when enabled; deadband in engineering units (numbers only);
// max_interval records the current value again after that long without a
// record.
type HistoryConf struct {
	Enabled     bool     `yaml:"enabled" json:"enabled"`
	Deadband    *float64 `yaml:"deadband,omitempty" json:"deadband,omitempty"`
	MaxInterval string   `yaml:"max_interval,omitempty" json:"max_interval,omitempty"`
}

// Limits of the project file and of tag imports (docs/limits.md). They
// bound memory: a tag costs about 1 KB while a project is applied.
const (
	// MaxProjectBytes is the largest project document: 32 MiB.
	MaxProjectBytes = 32 << 20
	// MaxTagsPerProject is the most tags one project holds: 100,000 (the
	// appliance's sizing, bench/README.md, B10's largest case).
	MaxTagsPerProject = 100000
	// MaxTagsPerImport is the most rows one tag CSV or YAML import takes:
	// 100,000 (a project's worth; the REST route's 16 MiB body holds them).
	MaxTagsPerImport = 100000
	// MaxTagText is the longest text of a tag key other than the path and
	// the description (address, type, units, scan, ...): 256 bytes.
	MaxTagText = 256
	// MaxTagDescription is the longest tag description: 4,096 bytes.
	MaxTagDescription = 4096
	// MaxDeviceName is the longest device name: 64 bytes (it is part of
	// REST paths, /api/v1/devices/{name}).
	MaxDeviceName = 64
)

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

// ParseProject strictly decodes a project document (YAML or JSON), at most
// MaxProjectBytes and MaxTagsPerProject tags, with every tag path in NFC
// (tagpath.Normalize).
//
// Every problem is reported, each with its line and key in words. Unless
// the document is not YAML at all (a *SyntaxError, nil project) or over
// the size limit, the project is returned decoded as far as the problems
// allow, together with the error, so a caller such as --check-config can
// go on and report the remaining problems in the same run. A large
// project is parsed one tag at a time (see decodeDoc).
func ParseProject(b []byte) (*Project, error) {
	if len(b) > MaxProjectBytes {
		return nil, fmt.Errorf("project of %d bytes is over the limit of %d (docs/limits.md)", len(b), MaxProjectBytes)
	}
	var p Project
	_, err := decodeDoc(b, &p, "the project", MaxTagsPerProject)
	var se *SyntaxError
	if errors.As(err, &se) {
		return nil, err
	}
	for i := range p.Tags {
		p.Tags[i].Path = tagpath.Normalize(p.Tags[i].Path)
	}
	return &p, err
}

// checkLimits checks a tag's min and max: finite numbers, min <= max, on
// a tag whose values are numbers (not bool or string).
func checkLimits(tc TagConfig, typ value.Type, textual bool) []error {
	if tc.Min == nil && tc.Max == nil {
		return nil
	}
	var errs []error
	if textual {
		errs = append(errs, fmt.Errorf("min and max apply to numbers, not to a %s tag (remove them)", typ))
	}
	for _, l := range []struct {
		key string
		v   *float64
	}{{"min", tc.Min}, {"max", tc.Max}} {
		if l.v != nil && (math.IsNaN(*l.v) || math.IsInf(*l.v, 0)) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite number", l.key, *l.v))
		}
	}
	if tc.Min != nil && tc.Max != nil && *tc.Min > *tc.Max {
		errs = append(errs, fmt.Errorf("min %v is above max %v", *tc.Min, *tc.Max))
	}
	return errs
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
			errs = append(errs, fmt.Errorf("%s:%d: tag %s: %w", p.File, tc.Line, quotePath(tc.Path), err))
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
	} else if clean, err := tagpath.Clean(tc.Path); err != nil {
		errs = append(errs, pathError(err))
	} else {
		t.Path = clean
	}
	if tc.Device == "" {
		errs = append(errs, errors.New("missing device"))
	}
	for _, f := range []struct{ key, v string }{{"device", tc.Device}, {"address", tc.Address}, {"type", tc.Type},
		{"byte_order", tc.ByteOrder}, {"scan", tc.Scan}, {"units", tc.Units}, {"write_level", tc.WriteLevel},
		{"non_finite", tc.NonFinite}, {"string_byte_order", tc.StringByteOrder}, {"encoding", tc.Encoding}} {
		if len(f.v) > MaxTagText {
			errs = append(errs, fmt.Errorf("%s of %d bytes is over the limit of %d (docs/limits.md)", f.key, len(f.v), MaxTagText))
		}
	}
	if len(tc.Description) > MaxTagDescription {
		errs = append(errs, fmt.Errorf("description of %d bytes is over the limit of %d (docs/limits.md)", len(tc.Description), MaxTagDescription))
	}
	pt, err := TagPoint(tc)
	if err != nil {
		errs = append(errs, err)
	}
	pt.Tag = t.Path
	t.Point = pt
	switch tc.ByteOrder {
	case "", "ABCD", "CDAB", "BADC", "DCBA":
	default:
		errs = append(errs, fmt.Errorf("byte_order %q: want ABCD, CDAB, BADC or DCBA", tc.ByteOrder))
	}
	if tc.UnitID != nil && (*tc.UnitID < 0 || *tc.UnitID > 255) {
		errs = append(errs, fmt.Errorf("unit_id %d: want 0..255", *tc.UnitID))
	}
	textual := err == nil && (pt.Type == value.Bool || pt.Type == value.String)
	stringOpts := tc.StringByteOrder != "" || tc.Encoding != ""
	switch {
	case stringOpts && err == nil && pt.Type != value.String:
		errs = append(errs, fmt.Errorf("string_byte_order and encoding apply to string tags, not %s", pt.Type))
	case stringOpts:
		switch tc.StringByteOrder {
		case "", "high", "low":
		default:
			errs = append(errs, fmt.Errorf("string_byte_order %q: want high or low", tc.StringByteOrder))
		}
		switch tc.Encoding {
		case "", "utf8", "ascii", "latin1":
		default:
			errs = append(errs, fmt.Errorf("encoding %q: want utf8, ascii or latin1", tc.Encoding))
		}
	}
	switch tc.NonFinite {
	case "", "bad":
	case "pass":
		t.PassNonFinite = true
	default:
		errs = append(errs, fmt.Errorf("non_finite %q: want bad (the default) or pass", tc.NonFinite))
	}
	errs = append(errs, checkLimits(tc, pt.Type, textual)...)
	t.Min, t.Max = tc.Min, tc.Max
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
	if db := tc.Deadband; db != nil {
		abs, pct := deref(db.Absolute), deref(db.Percent)
		switch {
		case textual:
			errs = append(errs, fmt.Errorf("deadband on a %s tag: a deadband applies to numbers, and every change of a %s is reported (remove it)", pt.Type, pt.Type))
		case abs < 0 || pct < 0 || math.IsNaN(abs) || math.IsNaN(pct):
			errs = append(errs, errors.New("deadband must not be negative"))
		}
		t.Deadband = tagengine.Deadband{Absolute: abs, Percent: pct}
	}
	if h := tc.History; h != nil && h.Enabled {
		pol := &tagengine.HistoryPolicy{Deadband: deref(h.Deadband)}
		switch {
		case h.Deadband != nil && textual:
			errs = append(errs, fmt.Errorf("history deadband on a %s tag: every change of a %s is recorded (remove it)", pt.Type, pt.Type))
		case pol.Deadband < 0 || math.IsNaN(pol.Deadband):
			errs = append(errs, fmt.Errorf("history deadband %g must not be negative", pol.Deadband))
		}
		if h.MaxInterval != "" {
			iv, err := ParseDuration(h.MaxInterval)
			if err != nil || iv < 0 {
				errs = append(errs, fmt.Errorf("history max_interval %q: want a duration such as 60s", h.MaxInterval))
			}
			pol.MaxInterval = iv
		}
		t.History = pol
	}
	if s := tc.Scale; s != nil {
		switch {
		case len(s.Raw) > 0 || len(s.Eng) > 0:
			if len(s.Raw) != 2 || len(s.Eng) != 2 || s.Factor != nil || s.Offset != nil {
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
			t.Scale = tagengine.Scale{Factor: f, Offset: deref(s.Offset)}
		}
	}
	if len(errs) > 0 {
		return tagengine.Tag{}, errors.Join(errs...)
	}
	return t, nil
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// TagPoint returns the driver's view of a tag config (address, type, byte
// order, unit id, string options). When the type is not a type name it
// returns the error EngineTags reports for it, with the point's type
// value.TypeUnknown (CheckTagOnDevice still checks its address).
func TagPoint(tc TagConfig) (device.Point, error) {
	p := device.Point{Tag: tc.Path, Address: tc.Address, Type: value.Float64, ByteOrder: tc.ByteOrder,
		StringByteOrder: tc.StringByteOrder, Encoding: tc.Encoding}
	if tc.UnitID != nil {
		p.UnitID, p.HasUnitID = *tc.UnitID, true
	}
	if tc.Type != "" {
		typ, err := value.ParseType(tc.Type)
		if err != nil {
			p.Type = value.TypeUnknown
			return p, err
		}
		p.Type = typ
	}
	return p, nil
}

// PointChecker is what the tag checks need of a device's driver
// (device.Driver has it).
type PointChecker interface {
	CheckPoint(p device.Point) error
}

// CheckTagOnDevice checks tc's address against its device's driver, the
// check that needs the project's devices. A tag whose type is not valid
// (reported by the tag's own checks) still has its address checked, with
// device.AddressChecker when the driver has one, so that one pass reports
// both problems.
func CheckTagOnDevice(tc TagConfig, drv PointChecker) error {
	pt, err := TagPoint(tc)
	if err == nil {
		return drv.CheckPoint(pt)
	}
	if ac, ok := drv.(device.AddressChecker); ok {
		return ac.CheckAddress(tc.Address)
	}
	return nil
}

// TagDevices is what the tag checks of an import need of the project's
// devices: the device names the project has, and the drivers built for
// them (a device whose own config is bad has a name and no driver: the
// addresses of its tags are not checked).
type TagDevices struct {
	Names   []string
	Drivers map[string]PointChecker
}

// Checkers converts a map of drivers (device.Driver) for TagDevices.
func Checkers[D PointChecker](m map[string]D) map[string]PointChecker {
	out := make(map[string]PointChecker, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// check returns the problems of tc against the devices: a device the
// project lacks (naming those it has), an address its driver refuses.
func (td *TagDevices) check(tc TagConfig) []error {
	if td == nil || tc.Device == "" {
		return nil
	}
	drv, ok := td.Drivers[tc.Device]
	if !ok {
		if slices.Contains(td.Names, tc.Device) {
			return nil // its device's config is reported on its own
		}
		return []error{fmt.Errorf("unknown device %q (the project has: %s)", tc.Device, strings.Join(td.Names, ", "))}
	}
	if err := CheckTagOnDevice(tc, drv); err != nil {
		return []error{fmt.Errorf("device %q: %w", tc.Device, err)}
	}
	return nil
}

// ScriptFile returns the absolute path of a script's file.
func (p *Project) ScriptFile(s ScriptConfig) string {
	return resolve(filepath.Dir(p.File), s.File)
}

// pathError words a refused tag path for a tag's message, which names the
// path already: "invalid path: segment 2 "": empty (...); the rule: ...".
func pathError(err error) error {
	var pe *tagpath.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("invalid path: %s (%s)", pe.Reason, tagpath.Rule)
	}
	return err
}

// quotePath quotes a tag path for a message, shortened when it is long (a
// 40 KB path must not drown the message that refuses it).
func quotePath(p string) string {
	const max = 120
	if len(p) <= max {
		return strconv.Quote(p)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return strconv.Quote(p[:cut]) + fmt.Sprintf("… (%d bytes)", len(p))
}
