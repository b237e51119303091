package auth

import "slices"

// Session is what the server knows of a LiveView browser session, from its
// own session store: never from anything the request carries.
type Session struct {
	User        string
	Realm       Realm // RealmPlatform, RealmOperator, RealmAnonymous, or anything else (unknown)
	Level       Level // an operator's level: view, operate or supervise
	Permissions []Permission
	Panel       string // the view the request came from, for the audit trail
	ID          string // the session's id (SessionInfo.ID), carried by the grant as SessionID
}

// EscapeHatchEnv is the environment variable that restores the old,
// unrestricted browser script grant when set to "off" (README: Operators and LiveView panels).
const EscapeHatchEnv = "QUBIQ_BROWSER_SCRIPT_SCOPES"

// LiveViewGrant derives the grant a script started from a LiveView session
// runs with (README: Operators and LiveView panels, the LiveView table):
//
//	platform realm (Designer)          unrestricted
//	operator below operate             reads only
//	operator at operate or above       reads + tag, db, hist, vars, file writes
//	operator at supervise or above     the above + script:execute
//	anonymous, unknown realm           reads only
//
// escapeHatch (QUBIQ_BROWSER_SCRIPT_SCOPES=off) makes every session
// unrestricted; the second result reports whether the hatch widened this
// grant, so the caller can audit it.
func LiveViewGrant(s Session, escapeHatch bool) (Grant, bool) {
	origin := "liveview"
	if s.Panel != "" {
		origin += ":" + s.Panel
	}
	principal := s.User
	if principal == "" {
		principal = "anonymous"
	}
	g := Grant{Principal: principal, Realm: s.Realm, Origin: origin, SessionID: s.ID}
	switch {
	case s.Realm == RealmPlatform:
		full := Full(principal, RealmPlatform, origin)
		full.Permissions = slices.Clone(s.Permissions)
		full.SessionID = s.ID
		return full, false
	case s.Realm == RealmOperator && s.Level >= LevelOperate:
		g.Scopes = append(slices.Clone(ReadScopes), TagWrite, DBWrite, HistWrite, VarsWrite, FileWrite)
		if s.Level >= LevelSupervise {
			g.Scopes = append(g.Scopes, ScriptExecute)
		}
		g.WriteLevel = s.Level
	case s.Realm == RealmOperator:
		g.Scopes = slices.Clone(ReadScopes)
		g.WriteLevel = LevelNone
	default: // anonymous kiosk sessions and unknown realms
		g.Realm = RealmAnonymous
		if s.Realm != "" && s.Realm != RealmAnonymous {
			g.Realm = s.Realm
		}
		g.Scopes = slices.Clone(ReadScopes)
		g.WriteLevel = LevelNone
	}
	if escapeHatch {
		wide := Full(principal, g.Realm, origin+" (escape hatch)")
		wide.Permissions = nil
		wide.SessionID = s.ID
		return wide, true
	}
	return g, false
}

// LiveViewSessionGrant is the grant of a LiveView session's own requests
// (REST and the WebSocket; docs/alarms.md, "LiveView"): LiveViewGrant's,
// which always holds alarm:read, plus alarm:ack for an operator at
// operate or above, so an operator acknowledges and shelves alarms from a
// panel; each alarm's ack_level or shelve_level is then checked against
// the session's level like a tag write. Scripts started from a panel keep
// LiveViewGrant's table, not widened.
func LiveViewSessionGrant(s Session) Grant {
	g, _ := LiveViewGrant(s, false)
	if s.Realm == RealmOperator && s.Level >= LevelOperate && !g.HasScope(AlarmAck) {
		g.Scopes = append(g.Scopes, AlarmAck)
	}
	return g
}
