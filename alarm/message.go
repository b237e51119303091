package alarm

import (
	"fmt"
	"strconv"
	"strings"

	"qubiq.dev/edge/value"
)

// msgPart is a piece of a compiled message: literal text, or a field with
// an optional number of decimals (-1: as is).
type msgPart struct {
	lit   string
	field string
	prec  int
}

// messageFields are the placeholders a message may hold (docs/alarms.md,
// "Messages").
var messageFields = map[string]bool{
	"value": true, "units": true, "setpoint": true, "low": true, "high": true, "name": true,
	"source": true, "display_path": true, "quality": true, "priority": true, "rate": true,
}

// compileMessage parses a message: text with {field} or {field:.Nf}
// placeholders; {{ and }} are literal braces. An unknown field or an
// unclosed brace is an error naming it.
func compileMessage(s string) ([]msgPart, error) {
	var out []msgPart
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed { at character %d (write {{ for a brace)", i+1)
			}
			spec := s[i+1 : i+end]
			name, format, hasFormat := strings.Cut(spec, ":")
			if !messageFields[name] {
				return nil, fmt.Errorf("unknown placeholder {%s} (have {value}, {units}, {setpoint}, {low}, {high}, {rate}, {name}, {source}, {display_path}, {quality}, {priority})", spec)
			}
			p := msgPart{field: name, prec: -1}
			if hasFormat {
				digits, ok := strings.CutPrefix(format, ".")
				digits, ok2 := strings.CutSuffix(digits, "f")
				n, err := strconv.Atoi(digits)
				if !ok || !ok2 || err != nil || n < 0 || n > 9 {
					return nil, fmt.Errorf("placeholder {%s}: want a format such as {%s:.1f} (0 to 9 decimals)", spec, name)
				}
				p.prec = n
			}
			if lit.Len() > 0 {
				out = append(out, msgPart{lit: lit.String()})
				lit.Reset()
			}
			out = append(out, p)
			i += end
		case c == '}':
			return nil, fmt.Errorf("unmatched } at character %d (write }} for a brace)", i+1)
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		out = append(out, msgPart{lit: lit.String()})
	}
	return out, nil
}

// defaultMessage is the message of a definition that sets none.
func defaultMessage(m Mode) []msgPart {
	var s string
	switch m {
	case ModeAbove:
		s = "{display_path}: above {setpoint} {units}: {value} {units}"
	case ModeBelow:
		s = "{display_path}: below {setpoint} {units}: {value} {units}"
	case ModeBetween:
		s = "{display_path}: between {low} and {high} {units}: {value} {units}"
	case ModeOutside:
		s = "{display_path}: outside {low} to {high} {units}: {value} {units}"
	case ModeState, ModeEquals:
		s = "{display_path}: {value}"
	case ModeBadQuality:
		s = "{display_path}: quality {quality}"
	case ModeRate:
		s = "{display_path}: changing at {rate} {units}/s: {value} {units}"
	}
	parts, _ := compileMessage(s)
	return parts
}

// msgArgs are the values a message is rendered with.
type msgArgs struct {
	value                 value.Value
	units, quality        string
	setpoint, low, high   *float64
	rate                  *float64
	name, source, display string
	priority              string
}

// render renders parts with a, collapsing the spaces an empty field
// leaves.
func render(parts []msgPart, a msgArgs) string {
	var b strings.Builder
	num := func(f *float64, prec int) string {
		if f == nil {
			return "?"
		}
		return formatNumber(*f, prec)
	}
	for _, p := range parts {
		if p.field == "" {
			b.WriteString(p.lit)
			continue
		}
		switch p.field {
		case "value":
			if f, ok := value.ToFloat(a.value); ok && !isBool(a.value) {
				b.WriteString(formatNumber(f, p.prec))
			} else if a.value == nil {
				b.WriteString("?")
			} else {
				b.WriteString(fmt.Sprint(a.value))
			}
		case "units":
			b.WriteString(a.units)
		case "setpoint":
			b.WriteString(num(a.setpoint, p.prec))
		case "low":
			b.WriteString(num(a.low, p.prec))
		case "high":
			b.WriteString(num(a.high, p.prec))
		case "rate":
			b.WriteString(num(a.rate, p.prec))
		case "name":
			b.WriteString(a.name)
		case "source":
			b.WriteString(a.source)
		case "display_path":
			b.WriteString(a.display)
		case "quality":
			b.WriteString(a.quality)
		case "priority":
			b.WriteString(a.priority)
		}
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(b.String(), " :", ":")), " ")
}

func isBool(v value.Value) bool {
	_, ok := v.(bool)
	return ok
}

// formatNumber prints f with prec decimals, or as short as it is exact
// (prec < 0).
func formatNumber(f float64, prec int) string {
	if prec >= 0 {
		return strconv.FormatFloat(f, 'f', prec, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
