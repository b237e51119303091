package auth

import (
	"fmt"
	"slices"
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
// The checks, each refused with a *DeniedError of kind "wider" (target,
// when not empty, prefixes the message):
//   - every scope of want is one of g's, every permission of want is one
//     of g's, and want's write level is not above g's (the order view <
//     operate < supervise < design; LevelNone is below every level): the
//     refusal names everything want asks beyond g at once (`cannot grant
//     scopes "db:read", "db:write": the creating grant does not hold
//     them`), so one answer says all the maker lacks;
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
	if need, reason := g.lacks(want); need != "" {
		return wider(need, reason)
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

// lacks names every scope, permission and the write level of want that g
// does not hold ("" when none), and why: `scopes "a", "b" and permission
// "designer"`, "the creating grant does not hold them".
func (g Grant) lacks(want Grant) (need, reason string) {
	var scopes, perms []string
	for _, s := range contractOrder(want.Scopes) {
		if !g.HasScope(s) {
			scopes = append(scopes, fmt.Sprintf("%q", s))
		}
	}
	for _, p := range want.Permissions {
		if !g.HasPermission(p) {
			perms = append(perms, fmt.Sprintf("%q", p))
		}
	}
	var parts []string
	if len(scopes) > 0 {
		parts = append(parts, plural("scope", scopes))
	}
	if len(perms) > 0 {
		parts = append(parts, plural("permission", perms))
	}
	level := want.WriteLevel > g.WriteLevel
	if level {
		parts = append(parts, fmt.Sprintf("write level %q", want.WriteLevel))
	}
	switch {
	case len(parts) == 0:
		return "", ""
	case len(parts) == 1 && level:
		return parts[0], fmt.Sprintf("above the creating grant's %q", g.WriteLevel)
	}
	need = strings.Join(parts, " and ")
	reason = "the creating grant does not hold it"
	if len(scopes)+len(perms) > 1 || level {
		reason = "the creating grant does not hold them"
	}
	if level {
		reason += fmt.Sprintf(" (its write level is %q)", g.WriteLevel)
	}
	return need, reason
}

// contractOrder returns scopes in AllScopes' order (any scope not of the
// contract last, as given).
func contractOrder(scopes []Scope) []Scope {
	out := make([]Scope, 0, len(scopes))
	for _, s := range AllScopes {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	for _, s := range scopes {
		if !slices.Contains(AllScopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// plural is `scope "a"` or `scopes "a", "b"`.
func plural(word string, quoted []string) string {
	if len(quoted) == 1 {
		return word + " " + quoted[0]
	}
	return word + "s " + strings.Join(quoted, ", ")
}

// UserSessionGrant is the grant the sessions of a user of realm, level and
// permissions hold (LiveViewSessionGrant without a panel): a platform user
// every scope at level design with its permissions; an operator its
// level's scopes (docs/security.md, "Who may manage a user").
func UserSessionGrant(realm Realm, level Level, perms []Permission) Grant {
	return LiveViewSessionGrant(Session{Realm: realm, Level: level, Permissions: perms})
}

// CoversUser reports (nil) whether g may create the user name of realm,
// level and permissions, or set its password: g covers the grant that
// user's sessions get (UserSessionGrant). Whoever sets a password can log
// in as the user, so either would let a narrow key mint itself a wider
// session. The refusal is Covers', naming everything g lacks at once, the
// user and its realm and level, and what a key needs to manage such a
// user.
func (g Grant) CoversUser(name string, realm Realm, level Level, perms []Permission) error {
	want := UserSessionGrant(realm, level, perms)
	err := g.Covers(want, fmt.Sprintf("user %q (%s)", name, describeUser(realm, level)))
	if de, ok := err.(*DeniedError); ok && de.Kind == "wider" {
		de.Reason += fmt.Sprintf("; whoever creates such a user or sets its password can log in as it, so the key doing it must hold what its sessions hold: %s (docs/security.md, \"Who may manage a user\")",
			describeGrant(want))
	}
	return err
}

// describeUser is "an operator at level operate" or "a platform user".
func describeUser(realm Realm, level Level) string {
	switch realm {
	case RealmOperator:
		return fmt.Sprintf("an operator at level %s", level)
	case RealmPlatform:
		return "a platform user"
	}
	return fmt.Sprintf("realm %s", realm)
}

// describeGrant lists g's scopes, write level and permissions for a
// message: "scopes tag:read, tag:write, write level operate".
func describeGrant(g Grant) string {
	var b strings.Builder
	b.WriteString("scopes ")
	for i, s := range contractOrder(g.Scopes) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(string(s))
	}
	if g.WriteLevel != LevelNone {
		fmt.Fprintf(&b, ", write level %s", g.WriteLevel)
	}
	if len(g.Permissions) > 0 {
		b.WriteString(", permissions ")
		for i, p := range g.Permissions {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(string(p))
		}
	}
	return b.String()
}
