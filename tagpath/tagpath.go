// Package tagpath is the one rule for tag paths in QUBIQ Edge: what a path
// may hold, how it is normalised, how long it may be, and how it maps onto
// MQTT topic levels. Every entry point (project file, tag CSV/YAML import,
// REST, scripts, MQTT) checks paths here, so one name is one tag everywhere.
//
// A tag path is one or more segments separated by '/' ("Halle 1/Kühlung/
// Vorlauf"). A segment holds Unicode letters (\p{L}) with their combining
// marks (\p{M}), numbers (\p{N}), '_', '-', '.' and space; it does not
// begin or end with a space and is not "." or "..". Paths are compared in
// Unicode Normalization Form C (UAX #15): Clean turns "Ku\u0308hlung" into
// "Kühlung" before anything else sees it. The limits (MaxPathBytes,
// MaxSegmentBytes, MaxDepth) count UTF-8 bytes of the NFC form, the unit in
// which bbolt keys and MQTT topics are bounded.
//
// tagpath imports the standard library and golang.org/x/text/unicode/norm
// only, so that value-level packages (api, tagengine, config, mqtt) can all
// use it. docs/limits.md lists the limits for users.
package tagpath

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits of a tag path, in bytes of its UTF-8 NFC form (a letter such as
// 'ü' takes 2 bytes, most CJK characters 3).
const (
	// MaxPathBytes is the longest path: 1,024 bytes. It keeps a path well
	// inside a bbolt key (32 KiB) and an MQTT topic (65,535 bytes, MQTT
	// 3.1.1 §1.5.3) together with the topic's prefix.
	MaxPathBytes = 1024
	// MaxSegmentBytes is the longest segment: 255 bytes, as a file name
	// on most file systems.
	MaxSegmentBytes = 255
	// MaxDepth is the most segments one path has: 32.
	MaxDepth = 32
)

// Separator separates the segments of a path.
const Separator = "/"

// ErrInvalid is wrapped by every error of this package: the path breaks the
// rule named in the message.
var ErrInvalid = errors.New("invalid tag path")

// Error is a refused path: the path as given (truncated for the message
// when it is very long) and what is wrong with it.
type Error struct {
	Path   string
	Reason string
}

// Error returns `tag path "P": reason`.
func (e *Error) Error() string {
	return fmt.Sprintf("tag path %q: %s", show(e.Path), e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// show shortens a path for a message (a 40 KB path would drown the reason).
func show(p string) string {
	const max = 80
	if len(p) <= max {
		return p
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return p[:cut] + fmt.Sprintf("… (%d bytes)", len(p))
}

// Rule is the one-line statement of the rule, for messages and docs.
const Rule = "segments of Unicode letters, digits, _ - . and space, separated by /"

// Normalize returns p in Unicode Normalization Form C. It does not check p.
func Normalize(p string) string {
	if norm.NFC.IsNormalString(p) {
		return p
	}
	return norm.NFC.String(p)
}

// Clean returns p in NFC (Normalize) when that is a valid tag path, else an
// *Error wrapping ErrInvalid that names the first problem: empty, too long,
// too deep, an empty segment (a leading, trailing or doubled '/'), a
// segment that is too long, "." or "..", begins or ends with a space, or a
// character outside the rule (named with its code point).
func Clean(p string) (string, error) {
	n := Normalize(p)
	if err := check(n); err != nil {
		err.Path = p
		return "", err
	}
	return n, nil
}

// Check reports whether p is a valid tag path already in NFC: nil, or the
// *Error that Clean gives, or one saying that p is not normalised (use
// Clean at an entry point; Check where paths were cleaned before).
func Check(p string) error {
	if err := check(p); err != nil {
		return err
	}
	if !norm.NFC.IsNormalString(p) {
		return &Error{Path: p, Reason: "not in Unicode normalization form C (NFC)"}
	}
	return nil
}

// Valid reports whether Check(p) is nil.
func Valid(p string) bool { return Check(p) == nil }

// CleanPrefix is Clean for a path prefix (an API key's tag range): the
// same rule, a trailing '/' allowed and kept. It returns the NFC form.
func CleanPrefix(p string) (string, error) {
	n := Normalize(p)
	if err := check(strings.TrimSuffix(n, Separator)); err != nil {
		err.Path = p
		return "", err
	}
	return n, nil
}

// CheckSegment checks one segment (no '/') against the rule.
func CheckSegment(s string) error {
	if why := segmentProblem(s); why != "" {
		return &Error{Path: s, Reason: why}
	}
	return nil
}

func check(p string) *Error {
	switch {
	case p == "":
		return &Error{Path: p, Reason: "empty"}
	case len(p) > MaxPathBytes:
		return &Error{Path: p, Reason: fmt.Sprintf("%d bytes, over the limit of %d", len(p), MaxPathBytes)}
	}
	depth := 0
	for seg := range strings.SplitSeq(p, Separator) {
		depth++
		if depth > MaxDepth {
			return &Error{Path: p, Reason: fmt.Sprintf("more than %d segments", MaxDepth)}
		}
		if why := segmentProblem(seg); why != "" {
			return &Error{Path: p, Reason: fmt.Sprintf("segment %d %q: %s", depth, show(seg), why)}
		}
	}
	return nil
}

// segmentProblem says what is wrong with one segment, or "".
func segmentProblem(s string) string {
	switch {
	case s == "":
		return "empty (a leading, trailing or doubled /)"
	case len(s) > MaxSegmentBytes:
		return fmt.Sprintf("%d bytes, over the segment limit of %d", len(s), MaxSegmentBytes)
	case s == "." || s == "..":
		return "\".\" and \"..\" are not names"
	case s[0] == ' ' || s[len(s)-1] == ' ':
		return "begins or ends with a space"
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if !allowed(r) {
			return fmt.Sprintf("character %U %s is not allowed (%s)", r, quoteRune(r), Rule)
		}
	}
	return ""
}

func quoteRune(r rune) string {
	if unicode.IsPrint(r) {
		return fmt.Sprintf("%q", r)
	}
	return "(not printable)"
}

// allowed reports whether r may appear in a segment.
func allowed(r rune) bool {
	switch r {
	case '_', '-', '.', ' ':
		return true
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r)
}

// Segments splits a path into its segments.
func Segments(p string) []string { return strings.Split(p, Separator) }

// TopicRefused are the characters an MQTT topic name must not hold (MQTT
// 3.1.1 §4.7: the wildcards '+' and '#' in a published topic, '/' inside a
// level, and U+0000 §1.5.3). No valid segment holds one of them, so a tag
// path maps onto topic levels without escaping.
const TopicRefused = "+#/\x00"

// CheckTopicText returns nil when every character of s may be in an MQTT
// topic, and otherwise an error naming the first one that may not (its
// byte offset and code point): s must be UTF-8 without U+0000 (MQTT
// 3.1.1 §1.5.3, "MUST NOT"), and without the characters §1.5.3 says a
// string SHOULD NOT hold, the control characters U+0001–U+001F and
// U+007F–U+009F and the Unicode noncharacters (U+FDD0–U+FDEF and every
// code point ending in FFFE or FFFF), which Mosquitto refuses by closing
// the connection of the client that sent them (lib/utf8_mosq.c,
// mosquitto_validate_utf8). It is the one rule of those characters for
// every topic the appliance publishes or subscribes to: command ids
// (mqtt.ValidID), flows' topics and filters, the appliance id. The
// wildcards and the level separator are the caller's rule
// (TopicRefused).
func CheckTopicText(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 { // not U+FFFD itself
				return fmt.Errorf("byte %d: not UTF-8 (MQTT 3.1.1 §1.5.3)", i)
			}
		case r <= 0x1F, r >= 0x7F && r <= 0x9F:
			return fmt.Errorf("byte %d: control character U+%04X cannot be in an MQTT topic (MQTT 3.1.1 §1.5.3)", i, r)
		case r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE:
			return fmt.Errorf("byte %d: noncharacter U+%04X cannot be in an MQTT topic (MQTT 3.1.1 §1.5.3)", i, r)
		}
	}
	return nil
}

// Topic returns the MQTT topic of the tag at path p under base (such as
// "qubiq/v1/line1-edge-01/tags"): base, '/', then each segment of p as one
// topic level, unchanged ("Halle 1/Kühlung" → "…/tags/Halle 1/Kühlung").
// A path that is not valid (Check) is refused with its *Error, so no
// refused character (TopicRefused) or empty level can reach a topic; the
// topic is at most len(base)+1+MaxPathBytes bytes, inside MQTT's 65,535.
func Topic(base, p string) (string, error) {
	if err := Check(p); err != nil {
		return "", err
	}
	if base == "" {
		return p, nil
	}
	return strings.TrimSuffix(base, Separator) + Separator + p, nil
}

// FromTopic is the inverse of Topic: the tag path of a topic under base,
// checked like every path (a topic that is not under base is refused).
func FromTopic(base, topic string) (string, error) {
	b := strings.TrimSuffix(base, Separator) + Separator
	if base == "" {
		b = ""
	}
	rest, ok := strings.CutPrefix(topic, b)
	if !ok {
		return "", &Error{Path: topic, Reason: fmt.Sprintf("topic is not under %q", base)}
	}
	return Clean(rest)
}
