package auth

import (
	"slices"
	"testing"
)

func TestLiveViewGrant_Table(t *testing.T) {
	writes := []Scope{TagWrite, DBWrite, HistWrite, VarsWrite, FileWrite}
	cases := []struct {
		name      string
		s         Session
		scopes    []Scope
		notScopes []Scope
		level     Level
	}{
		{"platform", Session{User: "eng", Realm: RealmPlatform, Permissions: []Permission{Designer}}, AllScopes, nil, LevelDesign},
		{"operator-view", Session{User: "o", Realm: RealmOperator, Level: LevelView}, ReadScopes, append(writes, ScriptExecute), LevelNone},
		{"operator-operate", Session{User: "o", Realm: RealmOperator, Level: LevelOperate}, append(slices.Clone(ReadScopes), writes...), []Scope{ScriptExecute}, LevelOperate},
		{"operator-supervise", Session{User: "o", Realm: RealmOperator, Level: LevelSupervise}, append(append(slices.Clone(ReadScopes), writes...), ScriptExecute), nil, LevelSupervise},
		{"anonymous", Session{Realm: RealmAnonymous}, ReadScopes, append(writes, ScriptExecute), LevelNone},
		{"unknown-realm", Session{User: "x", Realm: "partner"}, ReadScopes, append(writes, ScriptExecute), LevelNone},
		{"empty-realm", Session{User: "x"}, ReadScopes, append(writes, ScriptExecute), LevelNone},
		// A design "level" on an operator session gives no more than supervise's scopes.
		{"operator-design-level", Session{User: "o", Realm: RealmOperator, Level: LevelDesign}, append(slices.Clone(ReadScopes), ScriptExecute), nil, LevelDesign},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, widened := LiveViewGrant(c.s, false)
			if widened {
				t.Fatal("widened without the escape hatch")
			}
			for _, s := range c.scopes {
				if !g.HasScope(s) {
					t.Errorf("missing %s", s)
				}
			}
			for _, s := range c.notScopes {
				if g.HasScope(s) {
					t.Errorf("has %s", s)
				}
			}
			if g.WriteLevel != c.level {
				t.Errorf("level %s, want %s", g.WriteLevel, c.level)
			}
			if c.s.Realm != RealmPlatform && len(g.Permissions) != 0 {
				t.Errorf("operator got permissions %v", g.Permissions)
			}
		})
	}
}

func TestLiveViewGrant_EscapeHatchWidensAndSaysSo(t *testing.T) {
	g, widened := LiveViewGrant(Session{Realm: RealmOperator, Level: LevelView}, true)
	if !widened || !g.HasScope(ScriptExecute) || g.WriteLevel != LevelDesign {
		t.Fatalf("escape hatch grant %+v widened=%v", g, widened)
	}
}

func TestLiveViewSessionGrant_AlarmScopes(t *testing.T) {
	cases := []struct {
		name      string
		s         Session
		read, ack bool
	}{
		{"operator-view", Session{User: "o", Realm: RealmOperator, Level: LevelView}, true, false},
		{"operator-operate", Session{User: "o", Realm: RealmOperator, Level: LevelOperate}, true, true},
		{"operator-supervise", Session{User: "o", Realm: RealmOperator, Level: LevelSupervise}, true, true},
		{"anonymous", Session{Realm: RealmAnonymous}, true, false},
		{"platform", Session{User: "eng", Realm: RealmPlatform}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := LiveViewSessionGrant(c.s)
			if g.HasScope(AlarmRead) != c.read || g.HasScope(AlarmAck) != c.ack {
				t.Errorf("alarm:read %v alarm:ack %v; want %v %v", g.HasScope(AlarmRead), g.HasScope(AlarmAck), c.read, c.ack)
			}
			// A script started from the panel is not widened.
			if sg, _ := LiveViewGrant(c.s, false); c.s.Realm != RealmPlatform && sg.HasScope(AlarmAck) {
				t.Error("the script grant holds alarm:ack")
			}
		})
	}
}
