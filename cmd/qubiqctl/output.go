package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/value"
)

// tableTime is how tables print tag timestamps: UTC, milliseconds.
const tableTime = "2006-01-02T15:04:05.000Z07:00"

// table writes aligned columns (text/tabwriter) to w when flushed, with
// trailing blanks of each line removed.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

// newTable starts a table on w with the header row, if any.
func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// cleanCell makes a cell safe for a terminal: tabs and line breaks become
// spaces (the columns stay aligned), and every other control character
// (an ESC that would start a terminal escape sequence, NUL, DEL, C1
// controls) and the bidirectional overrides (U+202A–U+202E, U+2066–U+2069)
// are shown as a \u escape instead of acting on the terminal. Text from
// devices, notes and scripts reaches tables through it.
func cleanCell(c string) string {
	var b strings.Builder
	for _, r := range c {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// row adds one row; cells pass through cleanCell.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cleanCell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush aligns the rows and writes them to the table's writer.
func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	t.buf.Reset()
	_, err := io.WriteString(t.w, out.String())
	return err
}

// printJSON prints v as indented JSON: the API's answer, re-encoded from the
// same wire structs (integers stay exact).
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// formatValue prints a tag value as JSON (strings quoted, so "42" and 42
// differ, as they do for tags write).
func formatValue(v value.Value) string {
	b, err := apitypes.EncodeValue(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// objectFields renders a JSON object as one "key: value" line per key, in
// the document's order: strings without their quotes, other values as
// compact JSON. Anything but an object is one line of compact JSON; an
// empty raw is no line.
func objectFields(raw json.RawMessage) []string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return []string{string(compactJSON(raw))}
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return []string{string(compactJSON(raw))}
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return []string{string(compactJSON(raw))}
		}
		var str string
		if json.Unmarshal(v, &str) == nil {
			out = append(out, key+": "+str)
		} else {
			out = append(out, key+": "+string(compactJSON(v)))
		}
	}
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return formatTime(*t)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printHealth prints GET /health as a summary and a device table.
func printHealth(w io.Writer, h apitypes.Health) error {
	t := newTable(w)
	t.row("status", h.Status)
	for i, r := range h.Reasons {
		label := ""
		if i == 0 {
			label = "reasons"
		}
		t.row(label, r)
	}
	for i, w := range h.Warnings {
		label := ""
		if i == 0 {
			label = "warnings"
		}
		t.row(label, w)
	}
	t.row("version", orDash(h.Version))
	t.row("uptime", (time.Duration(h.UptimeS) * time.Second).String())
	sb := h.Sandbox
	t.row("sandbox", fmt.Sprintf("mode %s, linter %s", orDash(sb.Mode), orDash(sb.Linter)))
	py := orDash(sb.Python.Status)
	if sb.Python.Version != "" {
		py += " " + sb.Python.Version
	}
	if sb.Python.Path != "" {
		py += " (" + sb.Python.Path + ")"
	}
	t.row("python", py)
	hatch := "off"
	if h.EscapeHatch {
		hatch = "ON (QUBIQ_BROWSER_SCRIPT_SCOPES=off: browser scripts run unrestricted)"
	}
	t.row("escape hatch", hatch)
	for _, n := range sortedKeys(h.Flows) {
		f := h.Flows[n]
		line := f.State
		if f.Reason != "" {
			line += ": " + f.Reason
		}
		t.row("flow "+n, line)
	}
	// The sandbox's limits and hardening, one line per key, after the
	// summary rows.
	for _, o := range []struct {
		label string
		raw   json.RawMessage
	}{{"limits", sb.Limits}, {"hardening", sb.Hardening}} {
		for i, f := range objectFields(o.raw) {
			label := ""
			if i == 0 {
				label = o.label
			}
			t.row(label, f)
		}
	}
	if m := h.MQTT; m != nil {
		link := "down"
		if m.Connected {
			link = "connected to " + m.Broker
			if m.Since != nil {
				link += " since " + m.Since.UTC().Format(time.RFC3339)
			}
		}
		t.row("mqtt", link)
		if m.LastError != "" {
			when := ""
			if m.LastErrorAt != nil {
				when = " (" + m.LastErrorAt.UTC().Format(time.RFC3339) + ")"
			}
			t.row("mqtt last error", m.LastError+when)
		}
		t.row("mqtt outbox", fmt.Sprintf("%d messages, %d bytes, oldest %.0fs, %d dropped", m.OutboxDepth, m.OutboxBytes,
			m.OutboxOldestAgeS, m.OutboxDropped))
		signed := "required"
		if !m.RequireSigned {
			signed = "OFF (mqtt.require_signed: false: commands are not verified)"
		}
		t.row("mqtt signatures", signed)
		t.row("mqtt commands", fmt.Sprintf("%d accepted, %d refused", m.Accepted, m.Refused))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(h.Devices) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(h.Devices))
	for n := range h.Devices {
		names = append(names, n)
	}
	sort.Strings(names)
	t = newTable(w, "DEVICE", "STATE", "REASON")
	for _, n := range names {
		t.row(n, h.Devices[n].State, h.Devices[n].Reason)
	}
	return t.flush()
}

// printDiagnostics prints lint findings as FILE:LINE:COL  SEVERITY  CODE
// MESSAGE rows.
func printDiagnostics(w io.Writer, file string, ds []apitypes.Diagnostic) error {
	t := newTable(w, "LOCATION", "SEVERITY", "CODE", "MESSAGE")
	for _, d := range ds {
		t.row(fmt.Sprintf("%s:%d:%d", file, d.Line, d.Column), d.Severity, orDash(d.Code), d.Message)
	}
	return t.flush()
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
