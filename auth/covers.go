package auth

import (
	"fmt"
	"strings"
)

// Covers reports (nil) whether g covers want: want holds no scope,
// permission, write level or tag path that g lacks. It is the one "never
// wider than its maker" rule (docs: "Levels, realms, scopes, grants":
// nothing a request sends can widen a grant), applied wherever a grant
// makes another: an API key (Keys.Create), a user whose sessions would
// hold want (users administration), a supervisor's configured grant, a
// flow's grant. A nested script run's grant is Intersect of its caller's,
// which g always covers.
//
// The checks, in order, each refused with a *DeniedError of kind "wider"
// naming the first thing want asks beyond g (target, when not empty,
// prefixes the message):
//   - every scope of want is one of g's;
//   - every permission of want is one of g's;
//   - want's write level is not above g's (the order view < operate <
//     supervise < design; LevelNone is below every level);
//   - when g is limited to tag path prefixes, want is too, and each of
//     want's prefixes lies inside g's (whole segments, AllowsPath): a want
//     without prefixes (every tag path) is refused, naming g's prefixes.
//
// Expiry is not compared: a grant made by an expiring one keeps its own
// expiry.
func (g Grant) Covers(want Grant, target string) error {
	wider := func(need, reason string) error {
		return &DeniedError{Kind: "wider", Need: need, Reason: reason, Target: target}
	}
	for _, s := range want.Scopes {
		if !g.HasScope(s) {
			return wider(fmt.Sprintf("scope %q", s), "the creating grant does not hold it")
		}
	}
	for _, p := range want.Permissions {
		if !g.HasPermission(p) {
			return wider(fmt.Sprintf("permission %q", p), "the creating grant does not hold it")
		}
	}
	if want.WriteLevel > g.WriteLevel {
		return wider(fmt.Sprintf("write level %q", want.WriteLevel), fmt.Sprintf("above the creating grant's %q", g.WriteLevel))
	}
	if len(g.Prefixes) == 0 {
		return nil
	}
	if len(want.Prefixes) == 0 {
		return wider("every tag path", fmt.Sprintf("the creating grant is limited to prefixes %q", g.Prefixes))
	}
	for _, p := range want.Prefixes {
		if !g.AllowsPath(strings.TrimSuffix(p, "/")) {
			return wider(fmt.Sprintf("prefix %q", p), fmt.Sprintf("outside the creating grant's prefixes %q", g.Prefixes))
		}
	}
	return nil
}

// CoversUser reports (nil) whether g may create or manage a user of realm,
// level and permissions: g covers the grant that user's sessions get
// (LiveViewSessionGrant without a panel), so taking over the user's
// sessions cannot widen g. The refusal is Covers', its target naming the
// user's realm.
func (g Grant) CoversUser(realm Realm, level Level, perms []Permission) error {
	want := LiveViewSessionGrant(Session{Realm: realm, Level: level, Permissions: perms})
	return g.Covers(want, fmt.Sprintf("a %s user's sessions", realm))
}
