// Package auth owns who may do what in QUBIQ Edge: principals, realms, write
// levels, scopes, permissions and the grant that binds them to one execution
// (README: Operators and LiveView panels; sandbox/METHODS.md).
//
// A Grant is made on the Go side from verified state (an API key, a session,
// a signed supervisor command, the calling script) and is never widened by
// anything a request or a script sends. auth defines the small interfaces it
// needs (KeyStore) and imports no other package of the project except value;
// tagengine, store, api, sandbox and mqtt import it, never the reverse.
package auth

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Level is a write level. Levels are ordered: LevelView < LevelOperate <
// LevelSupervise < LevelDesign (README: Operators and LiveView panels; sandbox/METHODS.md).
// A caller at level L may write a tag whose write level is at most L.
type Level uint8

// Write levels, lowest first. LevelNone is below every level: a grant with it
// may write nothing.
const (
	LevelNone Level = iota
	LevelView
	LevelOperate
	LevelSupervise
	LevelDesign
)

var levelNames = []string{"none", "view", "operate", "supervise", "design"}

// String returns the level's contract name ("operate").
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel returns the level named s: view, operate, supervise or design.
// The error names s and the valid names.
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if i > 0 && n == s {
			return Level(i), nil
		}
	}
	return LevelNone, fmt.Errorf("unknown write level %q (want view, operate, supervise or design)", s)
}

// MarshalText encodes l as its name.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText decodes a level name.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Scope is a capability a grant may hold, such as "tag:write". The scopes are
// the contract's (README: Operators and LiveView panels; sandbox/METHODS.md).
type Scope string

// The scopes of the contract.
const (
	TagRead       Scope = "tag:read"
	TagWrite      Scope = "tag:write"
	AlarmRead     Scope = "alarm:read"
	AlarmAck      Scope = "alarm:ack"
	DBRead        Scope = "db:read"
	DBWrite       Scope = "db:write"
	HistRead      Scope = "hist:read"
	HistWrite     Scope = "hist:write"
	VarsRead      Scope = "vars:read"
	VarsWrite     Scope = "vars:write"
	FileRead      Scope = "file:read"
	FileWrite     Scope = "file:write"
	ScriptExecute Scope = "script:execute"
)

// AllScopes lists every scope of the contract, in the contract's order
// (docs: "Levels, realms, scopes, grants"). The alarm scopes gate the
// alarm routes and system.alarm.* methods the alarm work adds.
var AllScopes = []Scope{TagRead, TagWrite, AlarmRead, AlarmAck, DBRead, DBWrite, HistRead, HistWrite,
	VarsRead, VarsWrite, FileRead, FileWrite, ScriptExecute}

// ReadScopes are the read-only scopes ("reads only" in the LiveView table);
// reading alarms is among them.
var ReadScopes = []Scope{TagRead, AlarmRead, DBRead, HistRead, VarsRead, FileRead}

// ParseScope returns s as a Scope; the error names s when it is not a scope
// of the contract.
func ParseScope(s string) (Scope, error) {
	if slices.Contains(AllScopes, Scope(s)) {
		return Scope(s), nil
	}
	names := make([]string, len(AllScopes))
	for i, sc := range AllScopes {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("unknown scope %q (want one of %s)", s, strings.Join(names, ", "))
}

// Permission is an administrative right beyond scopes (README).
type Permission string

// The permissions of the contract.
const (
	Designer     Permission = "designer"
	SandboxAdmin Permission = "sandbox_admin"
	UsersAdmin   Permission = "users_admin"
	Firmware     Permission = "firmware"
)

// AllPermissions lists every permission of the contract.
var AllPermissions = []Permission{Designer, SandboxAdmin, UsersAdmin, Firmware}

// ParsePermission returns s as a Permission; the error names s when unknown.
func ParsePermission(s string) (Permission, error) {
	if slices.Contains(AllPermissions, Permission(s)) {
		return Permission(s), nil
	}
	return "", fmt.Errorf("unknown permission %q (want designer, sandbox_admin, users_admin or firmware)", s)
}

// Realm says where a principal comes from.
type Realm string

// Realms. RealmPlatform holds engineers (Designer); RealmOperator holds
// LiveView operators; RealmAPIKey, RealmSupervisor and RealmBootstrap are the
// machine principals; RealmScript is a script calling a script.
const (
	RealmPlatform   Realm = "platform"
	RealmOperator   Realm = "operator"
	RealmAPIKey     Realm = "apikey"
	RealmSupervisor Realm = "supervisor"
	RealmBootstrap  Realm = "bootstrap"
	RealmAnonymous  Realm = "anonymous"
)

// Grant is what one execution may do: who it is (Principal, Realm, Origin),
// its scopes, its write level, its administrative permissions and, when
// Prefixes is non-empty, the tag path prefixes it is limited to (whole
// segments). The zero Grant may do nothing.
type Grant struct {
	Principal   string
	Realm       Realm
	Origin      string // "rest", "script:pumps.start", "mqtt", "liveview:panel1"
	Scopes      []Scope
	WriteLevel  Level
	Permissions []Permission
	Prefixes    []string
	Expires     time.Time // zero: never
	// KeyID is the API key the grant came from (RealmAPIKey), so a run
	// that outlives a revocation can be stopped (Keys.StillValid).
	KeyID string
	// SessionID is the browser session the grant came from (LiveView), so
	// a run that outlives the session's logout or revocation is stopped
	// the same way (Sessions.StillValid).
	SessionID string
}

// HasScope reports whether g holds scope s.
func (g Grant) HasScope(s Scope) bool { return slices.Contains(g.Scopes, s) }

// HasPermission reports whether g holds permission p.
func (g Grant) HasPermission(p Permission) bool { return slices.Contains(g.Permissions, p) }

// AllowsLevel reports whether g may write a tag whose write level is l:
// g's level is at or above l in the order view < operate < supervise <
// design, and g has a level at all (LevelNone writes nothing). The tag
// engine's write path and the LiveView's writability use it.
func (g Grant) AllowsLevel(l Level) bool { return g.WriteLevel >= l && g.WriteLevel != LevelNone }

// Expired reports whether g is expired at now. A grant with an expiry is
// refused from that instant on: it is expired when now is not before
// Expires (at exactly Expires it is expired). A zero Expires never
// expires. This is the one expiry rule: the API middleware, the WebSocket,
// the system.* dispatcher, API key and session lookups all apply it.
func (g Grant) Expired(now time.Time) bool { return expiredAt(g.Expires, now) }

// expiredAt is Grant.Expired's rule for any expiry instant (zero: never).
func expiredAt(expires, now time.Time) bool { return !expires.IsZero() && !now.Before(expires) }

// AllowsPath reports whether the tag path p is inside g's prefixes. Prefixes
// match whole path segments: "Line1" matches "Line1" and "Line1/Pump", never
// "Line10/Pump" (README: demo walk-through, POST /apikeys). A grant without prefixes
// allows every path.
func (g Grant) AllowsPath(p string) bool {
	if len(g.Prefixes) == 0 {
		return true
	}
	for _, pre := range g.Prefixes {
		pre = strings.TrimSuffix(pre, "/")
		if pre == "" || p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// Intersect returns the grant that may do only what both g and other may:
// the common scopes and permissions, the lower write level, and prefixes that
// satisfy both. Principal, Realm and Origin are g's. A script called by a
// script runs with its caller's grant intersected with the entry point's
// restriction (never more than its caller: Covers holds it).
func (g Grant) Intersect(other Grant) Grant {
	out := g
	out.Scopes = nil
	for _, s := range g.Scopes {
		if other.HasScope(s) {
			out.Scopes = append(out.Scopes, s)
		}
	}
	out.Permissions = nil
	for _, p := range g.Permissions {
		if other.HasPermission(p) {
			out.Permissions = append(out.Permissions, p)
		}
	}
	out.WriteLevel = min(g.WriteLevel, other.WriteLevel)
	switch {
	case len(g.Prefixes) == 0:
		out.Prefixes = slices.Clone(other.Prefixes)
	case len(other.Prefixes) == 0:
		out.Prefixes = slices.Clone(g.Prefixes)
	default:
		out.Prefixes = nil
		for _, p := range g.Prefixes {
			if other.AllowsPath(p) {
				out.Prefixes = append(out.Prefixes, p)
			}
		}
		for _, p := range other.Prefixes {
			if g.AllowsPath(p) && !slices.Contains(out.Prefixes, p) {
				out.Prefixes = append(out.Prefixes, p)
			}
		}
		if len(out.Prefixes) == 0 {
			// Disjoint prefixes: nothing is allowed. A prefix that no tag
			// path can have keeps AllowsPath false for every path.
			out.Prefixes = []string{"\x00"}
		}
	}
	if !other.Expires.IsZero() && (out.Expires.IsZero() || other.Expires.Before(out.Expires)) {
		out.Expires = other.Expires
	}
	return out
}

// Full returns a grant with every scope, every permission and level design,
// as held by the bootstrap token and the platform realm.
func Full(principal string, realm Realm, origin string) Grant {
	return Grant{Principal: principal, Realm: realm, Origin: origin,
		Scopes: slices.Clone(AllScopes), WriteLevel: LevelDesign,
		Permissions: slices.Clone(AllPermissions)}
}

// DeniedError is the typed refusal of a call: it names the scope, level or
// permission that was missing (denials are loud and typed). Kind is
// "scope", "level", "permission", "prefix", "expired", "revoked", or
// "wider" (Grant.Covers: a grant asked for more than its maker holds).
type DeniedError struct {
	Kind   string
	Need   string // the scope, level or permission that was needed; for "wider" what was asked beyond the maker
	Target string // the tag, method or route, when there is one
	// Reason says why, for kind "wider": what the maker holds instead.
	Reason string
}

// Error names what was missing, e.g. `missing scope "tag:write"`, or for
// kind "wider" `cannot grant scope "db:write": the creating grant does
// not hold it` (prefixed with the target when there is one).
func (e *DeniedError) Error() string {
	if e.Kind == "wider" {
		s := "cannot grant " + e.Need + ": " + e.Reason
		if e.Target != "" {
			s = e.Target + ": " + s
		}
		return s
	}
	var s string
	switch e.Kind {
	case "scope":
		s = fmt.Sprintf("missing scope %q", e.Need)
	case "permission":
		s = fmt.Sprintf("missing permission %q", e.Need)
	case "level":
		s = fmt.Sprintf("write level %q required", e.Need)
	case "prefix":
		s = "path outside the allowed prefixes"
	default:
		s = "access denied: " + e.Need
	}
	if e.Target != "" {
		s += " for " + e.Target
	}
	return s
}

// RequireScope returns nil when g holds s, else a *DeniedError naming s.
func (g Grant) RequireScope(s Scope, target string) error {
	if g.HasScope(s) {
		return nil
	}
	return &DeniedError{Kind: "scope", Need: string(s), Target: target}
}

// RequirePermission returns nil when g holds p, else a *DeniedError naming p.
func (g Grant) RequirePermission(p Permission, target string) error {
	if g.HasPermission(p) {
		return nil
	}
	return &DeniedError{Kind: "permission", Need: string(p), Target: target}
}
