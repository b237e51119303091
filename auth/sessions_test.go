package auth

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type memSessions struct {
	mu     sync.Mutex
	m      map[string]SessionRecord
	writes int
}

func newMemSessions() *memSessions { return &memSessions{m: map[string]SessionRecord{}} }

func (s *memSessions) PutSession(r SessionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[r.ID] = r
	s.writes++
	return nil
}

func (s *memSessions) DeleteSession(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func (s *memSessions) Sessions() ([]SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SessionRecord
	for _, r := range s.m {
		out = append(out, r)
	}
	return out, nil
}

func newSessions(t *testing.T) (*Sessions, *Users, *memSessions, *clock) {
	t.Helper()
	us, _, c := newUsers(t)
	for _, u := range []UserRecord{{Name: "op", Realm: RealmOperator, Level: LevelOperate},
		{Name: "eng", Realm: RealmPlatform, Permissions: []Permission{Designer}}} {
		if err := us.Add(u, "password1"); err != nil {
			t.Fatal(err)
		}
	}
	st := newMemSessions()
	s, err := NewSessions(st, us, SessionOptions{Idle: 10 * time.Minute, Absolute: time.Hour, PersistEvery: time.Minute, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, us, st, c
}

func login(t *testing.T, s *Sessions, us *Users, name string) (string, SessionInfo) {
	t.Helper()
	u, err := us.Login(name, "password1", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tok, info, err := s.Create(u, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return tok, info
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSessions_Create_TokenNeverStored(t *testing.T) {
	s, us, st, _ := newSessions(t)
	tok, info := login(t, s, us, "op")
	if !strings.HasPrefix(tok, "qbs_") || info.CSRF == "" || info.Realm != RealmOperator || info.Level != LevelOperate {
		t.Fatalf("token %q info %+v", tok, info)
	}
	for id, r := range st.m {
		if strings.Contains(id, tok[4:]) || r.CSRF == tok || strings.Contains(r.ID, tok[4:]) {
			t.Fatal("the token is stored")
		}
	}
	got, err := s.Lookup(tok, true)
	if err != nil || got.ID != info.ID || got.CSRF != info.CSRF {
		t.Fatalf("lookup: %+v %v", got, err)
	}
}

func TestSessions_Lookup_UnknownAndMalformed(t *testing.T) {
	s, _, _, _ := newSessions(t)
	for _, tok := range []string{"", "qbs_", "qbs_" + strings.Repeat("A", 43), "qbq_x", "garbage"} {
		if _, err := s.Lookup(tok, true); !errors.Is(err, ErrSessionEnded) {
			t.Errorf("Lookup(%q) = %v, want ErrSessionEnded", tok, err)
		}
	}
}

func TestSessions_Lookup_IdleTimeout(t *testing.T) {
	s, us, st, c := newSessions(t)
	tok, info := login(t, s, us, "op")
	c.Add(9 * time.Minute)
	if _, err := s.Lookup(tok, true); err != nil { // touch: idle restarts
		t.Fatal(err)
	}
	c.Add(9 * time.Minute)
	if _, err := s.Lookup(tok, false); err != nil {
		t.Fatalf("18 min after login, 9 after the last use: %v", err)
	}
	c.Add(2 * time.Minute)
	if _, err := s.Lookup(tok, true); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("11 min idle: %v", err)
	}
	if !closed(info.Done) {
		t.Error("Done not closed at idle expiry")
	}
	if len(st.m) != 0 {
		t.Error("expired session left in the store")
	}
}

func TestSessions_Lookup_AbsoluteTimeout(t *testing.T) {
	s, us, _, c := newSessions(t)
	tok, _ := login(t, s, us, "op")
	for range 6 {
		c.Add(9*time.Minute + 59*time.Second)
		if _, err := s.Lookup(tok, true); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(time.Minute)
	if _, err := s.Lookup(tok, true); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("past the absolute timeout: %v", err)
	}
}

func TestSessions_RevokeUser_EndsAtOnce(t *testing.T) {
	s, us, _, _ := newSessions(t)
	tok1, i1 := login(t, s, us, "op")
	tok2, i2 := login(t, s, us, "op")
	tokE, _ := login(t, s, us, "eng")
	n, err := s.RevokeUser("op")
	if err != nil || n != 2 {
		t.Fatalf("RevokeUser = %d, %v", n, err)
	}
	if !closed(i1.Done) || !closed(i2.Done) {
		t.Error("Done not closed on revocation")
	}
	for _, tok := range []string{tok1, tok2} {
		if _, err := s.Lookup(tok, true); !errors.Is(err, ErrSessionEnded) {
			t.Errorf("revoked session still valid: %v", err)
		}
	}
	if _, err := s.Lookup(tokE, true); err != nil {
		t.Errorf("another user's session ended: %v", err)
	}
}

func TestSessions_Lookup_DisabledUserEndsSession(t *testing.T) {
	s, us, _, _ := newSessions(t)
	tok, info := login(t, s, us, "op")
	if err := us.Disable("op"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(tok, true); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("disabled user's session: %v", err)
	}
	if !closed(info.Done) {
		t.Error("Done not closed")
	}
}

func TestSessions_Logout(t *testing.T) {
	s, us, st, _ := newSessions(t)
	tok, info := login(t, s, us, "op")
	if err := s.Logout(tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(tok, true); !errors.Is(err, ErrSessionEnded) || !closed(info.Done) || len(st.m) != 0 {
		t.Fatalf("after logout: %v, done=%v, stored=%d", err, closed(info.Done), len(st.m))
	}
	if err := s.Logout(tok); err != nil {
		t.Fatalf("second logout: %v", err)
	}
}

func TestNewSessions_ReloadKeepsLiveDropsExpired(t *testing.T) {
	s, us, st, c := newSessions(t)
	tokOld, _ := login(t, s, us, "op")
	c.Add(8 * time.Minute)
	tokNew, _ := login(t, s, us, "eng")
	c.Add(3 * time.Minute) // the first is 11 min idle, the second 3
	s2, err := NewSessions(st, us, SessionOptions{Idle: 10 * time.Minute, Absolute: time.Hour, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Lookup(tokOld, true); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("expired session survived the reload: %v", err)
	}
	if info, err := s2.Lookup(tokNew, true); err != nil || info.User != "eng" {
		t.Errorf("live session lost on reload: %+v %v", info, err)
	}
	if len(st.m) != 1 {
		t.Errorf("store holds %d sessions, want 1", len(st.m))
	}
}

func TestSessions_Lookup_PersistsLastSeenAtMostEveryInterval(t *testing.T) {
	s, us, st, c := newSessions(t)
	tok, _ := login(t, s, us, "op")
	w := st.writes
	for range 10 {
		c.Add(5 * time.Second)
		if _, err := s.Lookup(tok, true); err != nil {
			t.Fatal(err)
		}
	}
	if st.writes-w != 0 {
		t.Fatalf("%d writes within 50s, want 0", st.writes-w)
	}
	c.Add(15 * time.Second)
	if _, err := s.Lookup(tok, true); err != nil {
		t.Fatal(err)
	}
	if st.writes-w != 1 {
		t.Fatalf("%d writes after 65s, want 1", st.writes-w)
	}
}

func TestSessions_Sweep_ClosesExpired(t *testing.T) {
	s, us, _, c := newSessions(t)
	_, info := login(t, s, us, "op")
	c.Add(11 * time.Minute)
	n, err := s.Sweep()
	if err != nil || n != 1 || !closed(info.Done) || s.Count() != 0 {
		t.Fatalf("Sweep = %d, %v; done=%v count=%d", n, err, closed(info.Done), s.Count())
	}
}

func TestSessionInfo_Session_GrantFromStoredStateOnly(t *testing.T) {
	s, us, _, _ := newSessions(t)
	tok, _ := login(t, s, us, "op")
	info, err := s.Lookup(tok, true)
	if err != nil {
		t.Fatal(err)
	}
	g, widened := LiveViewGrant(info.Session("pump1"), false)
	if widened || g.Principal != "op" || g.Realm != RealmOperator || g.WriteLevel != LevelOperate ||
		g.HasScope(ScriptExecute) || !g.HasScope(TagWrite) || g.Origin != "liveview:pump1" {
		t.Fatalf("grant %+v", g)
	}
}

// TestSessions_StillValid_GrantOfASession: the grant a panel's script runs
// with carries its session; it stays valid while the session lives and is
// refused (kind "revoked") once the session is logged out, its user's
// sessions revoked, or it timed out. A grant of no session passes.
func TestSessions_StillValid_GrantOfASession(t *testing.T) {
	s, us, _, c := newSessions(t)
	for _, end := range []string{"logout", "revoke", "idle"} {
		t.Run(end, func(t *testing.T) {
			tok, info := login(t, s, us, "op")
			g, _ := LiveViewGrant(info.Session("pump1"), false)
			if g.SessionID != info.ID {
				t.Fatalf("grant's SessionID %q, want the session's %q", g.SessionID, info.ID)
			}
			if err := s.StillValid(g); err != nil {
				t.Fatalf("live session: %v", err)
			}
			switch end {
			case "logout":
				if err := s.Logout(tok); err != nil {
					t.Fatal(err)
				}
			case "revoke":
				if _, err := s.RevokeUser("op"); err != nil {
					t.Fatal(err)
				}
			case "idle":
				c.Add(11 * time.Minute)
			}
			var de *DeniedError
			if err := s.StillValid(g); !errors.As(err, &de) || de.Kind != "revoked" || !strings.Contains(err.Error(), "session") {
				t.Fatalf("after %s: %v, want a revoked DeniedError naming the session", end, err)
			}
		})
	}
	if err := s.StillValid(Full("k", RealmAPIKey, "rest")); err != nil {
		t.Fatalf("a grant of no session: %v", err)
	}
}
