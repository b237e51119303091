package config

import (
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problems lists the problems an error of this package (or of a check
// built on it) holds, one message each, in the order found, each in the
// one shape docs/config.md gives for `qubiqd --check-config`:
//
//	/etc/qubiq/project.yaml:12: tag "Line1/Speed": unknown type "float65"
//	/etc/qubiq/qubiq.yaml: security.baseline_write_level "operator": want ...
//
// errors.Join trees and YAML type errors are split into their problems; a
// wrapper of several problems ("FILE:LINE: tag \"A\": %w" around a join)
// prefixes each of them with its own text, so no problem loses its file
// and line; "FILE: line N: what" is written "FILE:N: what". A nil error
// has none. Every front door that shows a refused config or project uses
// it: qubiqd's check and start, and the project import's answer.
func Problems(err error) []string {
	lines := flatten("", err)
	for i, l := range lines {
		lines[i] = fileLine(l)
	}
	return lines
}

// ProblemLine is the line a problem message of Problems names
// ("FILE:12: ..." or "line 12: ..."); 0 when none.
func ProblemLine(msg string) int {
	for _, re := range []*regexp.Regexp{fileLineRe, lineWordRe} {
		if m := re.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

var (
	lineWordRe  = regexp.MustCompile(`\bline (\d+)\b`)
	fileLineRe  = regexp.MustCompile(`^[^ ]*?:(\d+): `)
	fileWordsRe = regexp.MustCompile(`([^ ]+\.(?:ya?ml|csv|json)): line (\d+): `)
)

// fileLine writes "FILE: line N: what" as "FILE:N: what" (also after a
// prefix such as "start service: "); any other message is returned as it
// is.
func fileLine(msg string) string {
	if m := fileWordsRe.FindStringSubmatchIndex(msg); m != nil {
		return msg[:m[0]] + msg[m[2]:m[3]] + ":" + msg[m[4]:m[5]] + ": " + msg[m[1]:]
	}
	return msg
}

func flatten(prefix string, err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, flatten(prefix, e)...)
		}
		return out
	}
	if te, ok := err.(*yaml.TypeError); ok {
		out := make([]string, 0, len(te.Errors))
		for _, e := range te.Errors {
			out = append(out, prefix+strings.TrimSpace(e))
		}
		return out
	}
	msg := err.Error()
	// A wrapper of several problems ("FILE:LINE: tag: %w" around a join
	// or a YAML type error): its own text prefixes each of them.
	if w, ok := err.(interface{ Unwrap() error }); ok {
		if inner := w.Unwrap(); inner != nil && multi(inner) && strings.HasSuffix(msg, inner.Error()) {
			return flatten(prefix+strings.TrimSuffix(msg, inner.Error()), inner)
		}
	}
	var out []string
	for l := range strings.Lines(msg) {
		if l = strings.TrimRight(l, "\n"); strings.TrimSpace(l) != "" {
			out = append(out, prefix+l)
		}
	}
	return out
}

// multi reports whether err holds several problems: a join or a YAML type
// error, possibly wrapped.
func multi(err error) bool {
	for err != nil {
		switch x := err.(type) {
		case interface{ Unwrap() []error }, *yaml.TypeError:
			return true
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		default:
			return false
		}
	}
	return false
}
