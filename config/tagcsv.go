package config

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/tagpath"
)

// TagColumns are the columns of a tag CSV file, in the order FormatTagsCSV
// writes them: one for every key of a tag in the project file, so that a
// tag survives export and import unchanged (docs/tag-files.md). path,
// device and address are required in the header; the others may be left
// out. A header may list them in any order.
var TagColumns = []string{"path", "device", "address", "type", "byte_order", "scan", "scale", "units",
	"write_level", "read_only", "description", "unit_id", "deadband", "history", "history_deadband",
	"history_max_interval", "non_finite", "string_byte_order", "encoding", "min", "max"}

var requiredColumns = []string{"path", "device", "address"}

// TagImport configures ReadTagsCSV and ReadTagsYAML. Devices, when set,
// adds the checks that need the project's devices (an unknown device, an
// address its driver refuses) to the same pass as the others. MaxTags caps
// the rows (MaxTagsPerImport when 0).
type TagImport struct {
	Devices *TagDevices
	MaxTags int
	// Existing, when set, holds the project's tags by path: a CSV row for
	// one of them keeps the keys whose column the file does not have (a
	// file with the old columns does not drop a tag's unit_id or history).
	Existing map[string]TagConfig
}

func (o TagImport) maxTags() int {
	if o.MaxTags > 0 {
		return o.MaxTags
	}
	return MaxTagsPerImport
}

// ParseTagsCSV is ReadTagsCSV of b without device checks.
func ParseTagsCSV(b []byte) ([]TagConfig, error) {
	return ReadTagsCSV(bytes.NewReader(b), TagImport{})
}

// ReadTagsCSV reads a tag CSV file as a stream: a header row naming the
// columns (TagColumns, case-insensitive), then one tag per row. Cells are
// trimmed; an empty cell is an absent key. The cells (docs/tag-files.md):
//
//   - scale: "factor", "factor:offset", ":offset", "rawlo:rawhi:englo:enghi"
//     (ParseScale);
//   - read_only: true or false;
//   - unit_id: 0..255 (0 is a unit, not "absent");
//   - deadband: "0.5" (absolute), "2%" (percent) or both, "0.5 2%";
//   - history: on or off; history_deadband a number; history_max_interval
//     a duration (both need history);
//   - the others: the project file's keys as text.
//
// Empty lines and lines starting with '#' are skipped; a UTF-8 byte order
// mark is ignored.
//
// Every row is checked as the project file's tags are (path, type, byte
// order, scan, write level, scale, deadband, history, string options; a
// path twice in the file), and against opt.Devices when set. Every problem
// of the file is reported in one pass, each as "line N: tag "PATH": what",
// N the CSV line; on any problem no tag is returned, so nothing of the file
// is half-applied. Line of each returned tag is its CSV line. More rows
// than opt's cap is an error naming the cap; reading stops there.
func ReadTagsCSV(r io.Reader, opt TagImport) ([]TagConfig, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if bom, err := br.Peek(3); err == nil && bytes.Equal(bom, []byte("\ufeff")) {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("line 1: empty file; want a header row: " + strings.Join(TagColumns, ","))
	}
	if err != nil {
		return nil, csvError(err)
	}
	hline, _ := cr.FieldPos(0)
	col := map[string]int{}
	var errs []error
	nheader := len(header)
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case !slices.Contains(TagColumns, h):
			msg := fmt.Sprintf("line %d: unknown column %q (valid columns: %s)", hline, h, strings.Join(TagColumns, ", "))
			if s := device.SuggestKey(h, TagColumns, keyHints); s != "" {
				msg += "; " + s
			}
			errs = append(errs, errors.New(msg))
		case col[h] != 0:
			errs = append(errs, fmt.Errorf("line %d: column %q twice", hline, h))
		default:
			col[h] = i + 1
		}
	}
	for _, h := range requiredColumns {
		if col[h] == 0 {
			errs = append(errs, fmt.Errorf("line %d: missing column %q (the header needs %s)", hline, h, strings.Join(requiredColumns, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var tags []TagConfig
	seen := map[string]int{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, csvError(err))
			break // the reader cannot be trusted past a quoting error
		}
		if len(tags) >= opt.maxTags() {
			line, _ := cr.FieldPos(0)
			errs = append(errs, fmt.Errorf("line %d: more than %d tags in one import (the limit, docs/limits.md); split the file", line, opt.maxTags()))
			break
		}
		line, _ := cr.FieldPos(0)
		cell := func(name string) string {
			if i := col[name]; i > 0 && i <= len(rec) {
				return strings.TrimSpace(rec[i-1])
			}
			return ""
		}
		tc, rowErrs := tagFromCells(cell)
		tc.Line = line
		if old, ok := opt.Existing[tc.Path]; ok {
			keepColumns(&tc, old, col)
		}
		if len(rec) != nheader {
			rowErrs = append([]error{fmt.Errorf("%d fields, the header has %d", len(rec), nheader)}, rowErrs...)
		}
		rowErrs = append(rowErrs, tc.check(seen)...)
		rowErrs = append(rowErrs, opt.Devices.check(tc)...)
		for _, e := range rowErrs {
			errs = append(errs, fmt.Errorf("line %d: tag %s: %w", line, quotePath(tc.Path), e))
		}
		if len(errs) == 0 {
			tags = append(tags, tc)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tags, nil
}

// tagFromCells builds a tag config from a CSV row's cells by column name,
// with the problems of cells that are not text keys.
func tagFromCells(cell func(string) string) (TagConfig, []error) {
	tc := TagConfig{Path: tagpath.Normalize(cell("path")), Device: cell("device"), Address: cell("address"), Type: cell("type"),
		ByteOrder: cell("byte_order"), Scan: cell("scan"), Units: cell("units"), WriteLevel: cell("write_level"),
		Description: cell("description"), NonFinite: cell("non_finite"), StringByteOrder: cell("string_byte_order"),
		Encoding: cell("encoding")}
	var errs []error
	if s := cell("scale"); s != "" {
		sc, err := ParseScale(s)
		if err != nil {
			errs = append(errs, err)
		}
		tc.Scale = sc
	}
	for _, lim := range []struct {
		col string
		to  **float64
	}{{"min", &tc.Min}, {"max", &tc.Max}} {
		if s := cell(lim.col); s != "" {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %q: want a number", lim.col, s))
			} else {
				*lim.to = &f
			}
		}
	}
	if s := cell("read_only"); s != "" {
		ro, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("read_only %q: want true or false", s))
		}
		tc.ReadOnly = ro
	}
	if s := cell("unit_id"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("unit_id %q: want a whole number 0..255", s))
		} else {
			tc.UnitID = &n
		}
	}
	if s := cell("deadband"); s != "" {
		db, err := ParseDeadband(s)
		if err != nil {
			errs = append(errs, err)
		}
		tc.Deadband = db
	}
	hdb, hmax := cell("history_deadband"), cell("history_max_interval")
	switch h := strings.ToLower(cell("history")); h {
	case "":
		if hdb != "" || hmax != "" {
			errs = append(errs, errors.New("history_deadband and history_max_interval need history: on or off"))
		}
	case "on", "off", "true", "false":
		tc.History = &HistoryConf{Enabled: h == "on" || h == "true", MaxInterval: hmax}
		if hdb != "" {
			f, err := strconv.ParseFloat(hdb, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("history_deadband %q: want a number", hdb))
			} else {
				tc.History.Deadband = &f
			}
		}
	default:
		errs = append(errs, fmt.Errorf("history %q: want on or off", cell("history")))
	}
	return tc, errs
}

// keepColumns gives tc the keys of old whose column the file lacks.
func keepColumns(tc *TagConfig, old TagConfig, col map[string]int) {
	keep := func(name string) bool { return col[name] == 0 }
	if keep("type") {
		tc.Type = old.Type
	}
	if keep("byte_order") {
		tc.ByteOrder = old.ByteOrder
	}
	if keep("scan") {
		tc.Scan = old.Scan
	}
	if keep("scale") {
		tc.Scale = old.Scale
	}
	if keep("units") {
		tc.Units = old.Units
	}
	if keep("write_level") {
		tc.WriteLevel = old.WriteLevel
	}
	if keep("read_only") {
		tc.ReadOnly = old.ReadOnly
	}
	if keep("description") {
		tc.Description = old.Description
	}
	if keep("unit_id") {
		tc.UnitID = old.UnitID
	}
	if keep("deadband") {
		tc.Deadband = old.Deadband
	}
	if keep("history") && keep("history_deadband") && keep("history_max_interval") {
		tc.History = old.History
	}
	if keep("non_finite") {
		tc.NonFinite = old.NonFinite
	}
	if keep("string_byte_order") {
		tc.StringByteOrder = old.StringByteOrder
	}
	if keep("encoding") {
		tc.Encoding = old.Encoding
	}
	if keep("min") {
		tc.Min = old.Min
	}
	if keep("max") {
		tc.Max = old.Max
	}
}

// check returns every problem of tc that needs no device (those
// EngineTags reports), and records its path in seen (path → line) to find
// a path given twice.
func (tc TagConfig) check(seen map[string]int) []error {
	var errs []error
	if first, dup := seen[tc.Path]; dup && tc.Path != "" {
		errs = append(errs, fmt.Errorf("defined twice in the file (first at line %d)", first))
	} else {
		seen[tc.Path] = tc.Line
	}
	if _, err := tc.engineTag(); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return errs
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d: %v", pe.Line, pe.Err)
	}
	return err
}

// ParseScale parses the CSV form of a tag's scale (docs/project.md, Project file:
// eng = raw × factor + offset): "factor" ("0.1"), "factor:offset"
// ("0.1:-40", "0.1:0" keeps an offset of 0), ":offset" (an offset without
// a factor), ":" (an empty scale) or "rawlo:rawhi:englo:enghi"
// ("0:27648:0:100", the {raw: [lo, hi], eng: [lo, hi]} form). The error
// names the text.
func ParseScale(s string) (*ScaleConf, error) {
	parts := strings.Split(s, ":")
	bad := func(format string, args ...any) (*ScaleConf, error) {
		return nil, fmt.Errorf("scale %q: want factor, factor:offset or rawlo:rawhi:englo:enghi "+format, append([]any{s}, args...)...)
	}
	num := func(p string, optional bool) (*float64, bool) {
		p = strings.TrimSpace(p)
		if p == "" && optional {
			return nil, true
		}
		f, err := strconv.ParseFloat(p, 64)
		return &f, err == nil
	}
	switch len(parts) {
	case 1:
		f, ok := num(parts[0], false)
		if !ok {
			return bad("(numbers)")
		}
		return &ScaleConf{Factor: f}, nil
	case 2:
		f, ok1 := num(parts[0], true)
		o, ok2 := num(parts[1], true)
		if !ok1 || !ok2 {
			return bad("(numbers)")
		}
		return &ScaleConf{Factor: f, Offset: o}, nil
	case 4:
		nums := make([]float64, 4)
		for i, p := range parts {
			f, ok := num(p, false)
			if !ok {
				return bad("(numbers)")
			}
			nums[i] = *f
		}
		return &ScaleConf{Raw: nums[0:2:2], Eng: nums[2:4:4]}, nil
	}
	return bad("(%d numbers given)", len(parts))
}

// FormatScale is the inverse of ParseScale: "" for no scale.
func FormatScale(sc *ScaleConf) string {
	if sc == nil {
		return ""
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if len(sc.Raw) == 2 && len(sc.Eng) == 2 && sc.Factor == nil && sc.Offset == nil {
		return f(sc.Raw[0]) + ":" + f(sc.Raw[1]) + ":" + f(sc.Eng[0]) + ":" + f(sc.Eng[1])
	}
	factor := ""
	if sc.Factor != nil {
		factor = f(*sc.Factor)
	}
	if sc.Offset != nil {
		return factor + ":" + f(*sc.Offset)
	}
	if sc.Factor == nil {
		return ":"
	}
	return factor
}

// ParseDeadband parses the CSV form of a tag's deadband: "0.5" (absolute,
// engineering units), "2%" (percent) or both ("0.5 2%"). The error names
// the text.
func ParseDeadband(s string) (*DeadbandConf, error) {
	db := &DeadbandConf{}
	for _, f := range strings.Fields(s) {
		pct := strings.HasSuffix(f, "%")
		x, err := strconv.ParseFloat(strings.TrimSuffix(f, "%"), 64)
		switch {
		case err != nil:
			return nil, fmt.Errorf("deadband %q: want 0.5 (absolute), 2%% (percent) or both", s)
		case pct && db.Percent == nil:
			db.Percent = &x
		case !pct && db.Absolute == nil:
			db.Absolute = &x
		default:
			return nil, fmt.Errorf("deadband %q: one absolute and one percent value at most", s)
		}
	}
	return db, nil
}

// FormatDeadband is the inverse of ParseDeadband: "" for none.
func FormatDeadband(db *DeadbandConf) string {
	if db == nil {
		return ""
	}
	var parts []string
	if db.Absolute != nil {
		parts = append(parts, strconv.FormatFloat(*db.Absolute, 'g', -1, 64))
	}
	if db.Percent != nil {
		parts = append(parts, strconv.FormatFloat(*db.Percent, 'g', -1, 64)+"%")
	}
	return strings.Join(parts, " ")
}

// formatLimit is a min or max cell: "" for none.
func formatLimit(f *float64) string {
	if f == nil {
		return ""
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

// FormatTagsCSV writes tags as a tag CSV file: the header (TagColumns)
// and one row per tag; ReadTagsCSV reads it back to the same tags, every
// key included (an empty deadband or scale mapping, which has no effect, is
// written as none).
func FormatTagsCSV(w io.Writer, tags []TagConfig) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(TagColumns); err != nil {
		return err
	}
	row := make([]string, len(TagColumns))
	for _, t := range tags {
		unit, hist, hdb := "", "", ""
		if t.UnitID != nil {
			unit = strconv.Itoa(*t.UnitID)
		}
		hmax := ""
		if h := t.History; h != nil {
			hist, hmax = "off", h.MaxInterval
			if h.Enabled {
				hist = "on"
			}
			if h.Deadband != nil {
				hdb = strconv.FormatFloat(*h.Deadband, 'g', -1, 64)
			}
		}
		row = append(row[:0], t.Path, t.Device, t.Address, t.Type, t.ByteOrder, t.Scan, FormatScale(t.Scale),
			t.Units, t.WriteLevel, strconv.FormatBool(t.ReadOnly), t.Description, unit, FormatDeadband(t.Deadband),
			hist, hdb, hmax, t.NonFinite, t.StringByteOrder, t.Encoding, formatLimit(t.Min), formatLimit(t.Max))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
