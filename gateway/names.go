package gateway

import (
	"fmt"
	"regexp"
	"strings"
)

// nameRe is a script module or entry name: a letter, then letters, digits
// or _, at most 64 characters (a Python identifier that the guardrail lets
// scripts define and call: names beginning with _ are refused).
var nameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// CheckName returns nil when s is a valid script module or entry name (a
// letter, then letters, digits or _, at most 64), else an error wrapping
// ErrInvalid that names what (`module`, `entry`) and s. It is the one rule
// for module and entry names: REST routes, script saves, message handlers,
// runOnGateway and MQTT commands all use it.
func CheckName(what, s string) error {
	if !nameRe.MatchString(s) {
		return fmt.Errorf("%w: %s %q: want a letter then letters, digits or _ (at most 64)", ErrInvalid, what, s)
	}
	return nil
}

// ParseEntry splits "module.entry" (system.script.runOnGateway, message
// handlers' entry, MQTT cmd/scripts/run) into its module and entry, each
// checked with CheckName; the error wraps ErrInvalid.
func ParseEntry(s string) (module, entry string, err error) {
	module, entry, ok := strings.Cut(s, ".")
	if !ok || !nameRe.MatchString(module) || !nameRe.MatchString(entry) {
		return "", "", fmt.Errorf("%w: entry %q: want \"module.entry\"", ErrInvalid, s)
	}
	return module, entry, nil
}
