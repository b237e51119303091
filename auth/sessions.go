package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// sessionPrefix starts every session token: "qbs_" then 43 base64url
// characters (32 random bytes).
const sessionPrefix = "qbs_"

// SessionRecord is a browser session as stored: ID is the hex SHA-256 of
// the token (the token, which is the cookie value, is never stored), CSRF
// the per-session token the page sends back in a header on every
// state-changing request, Addr the client address at login.
type SessionRecord struct {
	ID       string
	User     string
	CSRF     string
	Addr     string
	Created  time.Time
	LastSeen time.Time
}

// SessionStore persists sessions so that a daemon restart does not log out
// every panel. The service layer passes the store's implementation.
type SessionStore interface {
	PutSession(s SessionRecord) error
	DeleteSession(id string) error
	Sessions() ([]SessionRecord, error)
}

// UserSource is how Sessions reads the current user record on every lookup:
// a disabled or deleted user's sessions end at once, and the realm, level
// and permissions are always the stored ones. *Users implements it.
type UserSource interface {
	User(name string) (UserRecord, error)
}

// SessionInfo is a live session as the server knows it, from its own
// store: never from anything a request carries. Realm, Level and
// Permissions are the user's current ones. Done is closed when the session
// ends (logout, revocation, user disabled or password changed, expiry seen
// by Sweep): open WebSockets select on it and close.
type SessionInfo struct {
	ID          string
	User        string
	Realm       Realm
	Level       Level
	Permissions []Permission
	CSRF        string
	Addr        string
	Created     time.Time
	LastSeen    time.Time
	IdleExpires time.Time // LastSeen + idle timeout
	Expires     time.Time // Created + absolute timeout
	Done        <-chan struct{}
}

// Session returns the auth.Session LiveViewGrant derives a grant from, with
// panel (a view the server validated) for the audit trail.
func (i SessionInfo) Session(panel string) Session {
	return Session{User: i.User, Realm: i.Realm, Level: i.Level, Permissions: slices.Clone(i.Permissions), Panel: panel, ID: i.ID}
}

// ShortID is the first 12 hex digits of the session id, for logs and audit.
func (i SessionInfo) ShortID() string {
	if len(i.ID) > 12 {
		return i.ID[:12]
	}
	return i.ID
}

// SessionOptions configures Sessions. Zero fields take
// DefaultSessionOptions.
type SessionOptions struct {
	// Idle ends a session after this long without a request.
	Idle time.Duration
	// Absolute ends a session this long after login, whatever its use.
	Absolute time.Duration
	// PersistEvery bounds how often LastSeen is written to the store (a
	// lookup within it only updates memory).
	PersistEvery time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultSessionOptions: 30 min idle, 12 h absolute (one shift), LastSeen
// persisted at most once a minute.
var DefaultSessionOptions = SessionOptions{Idle: 30 * time.Minute, Absolute: 12 * time.Hour, PersistEvery: time.Minute}

// ErrSessionEnded is wrapped by Sessions.Lookup for a token that is unknown,
// malformed, logged out, revoked or expired. It never says which.
var ErrSessionEnded = errors.New("no such session, or it ended")

// Sessions holds the server-side browser sessions (issue 7): created at
// login, looked up by token on each request, ended by logout, revocation
// (RevokeUser) or the idle and absolute timeouts. Every change is written
// through to the SessionStore. It is safe for concurrent use.
type Sessions struct {
	store SessionStore
	users UserSource
	opts  SessionOptions

	mu sync.Mutex
	m  map[string]*liveSession // by id
}

type liveSession struct {
	rec       SessionRecord
	persisted time.Time // LastSeen as last written
	done      chan struct{}
}

// NewSessions loads the stored sessions, drops those already expired, and
// returns the manager.
func NewSessions(store SessionStore, users UserSource, opts SessionOptions) (*Sessions, error) {
	d := DefaultSessionOptions
	if opts.Idle <= 0 {
		opts.Idle = d.Idle
	}
	if opts.Absolute <= 0 {
		opts.Absolute = d.Absolute
	}
	if opts.PersistEvery <= 0 {
		opts.PersistEvery = d.PersistEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Sessions{store: store, users: users, opts: opts, m: map[string]*liveSession{}}
	recs, err := store.Sessions()
	if err != nil {
		return nil, fmt.Errorf("sessions: load: %w", err)
	}
	now := opts.Now()
	for _, r := range recs {
		if s.expired(r, now) {
			if err := store.DeleteSession(r.ID); err != nil {
				return nil, fmt.Errorf("sessions: drop expired: %w", err)
			}
			continue
		}
		s.m[r.ID] = &liveSession{rec: r, persisted: r.LastSeen, done: make(chan struct{})}
	}
	return s, nil
}

// Options returns the effective options (timeouts for the login answer).
func (s *Sessions) Options() SessionOptions { return s.opts }

func (s *Sessions) expired(r SessionRecord, now time.Time) bool {
	return expiredAt(r.LastSeen.Add(s.opts.Idle), now) || expiredAt(r.Created.Add(s.opts.Absolute), now)
}

func sessionID(token string) (string, bool) {
	secret, ok := strings.CutPrefix(token, sessionPrefix)
	if !ok || len(secret) != 43 {
		return "", false
	}
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:]), true
}

// Create starts a session for u, who has just proved its password, from
// addr. It returns the token (the cookie value, shown this once) and the
// session. A disabled user is refused with ErrBadCredentials.
func (s *Sessions) Create(u UserRecord, addr string) (string, SessionInfo, error) {
	if u.Disabled {
		return "", SessionInfo{}, ErrBadCredentials
	}
	secret, err := randomSecret()
	if err != nil {
		return "", SessionInfo{}, err
	}
	csrf, err := randomSecret()
	if err != nil {
		return "", SessionInfo{}, err
	}
	token := sessionPrefix + secret
	id, _ := sessionID(token)
	now := s.opts.Now().UTC()
	rec := SessionRecord{ID: id, User: u.Name, CSRF: csrf, Addr: addr, Created: now, LastSeen: now}
	if err := s.store.PutSession(rec); err != nil {
		return "", SessionInfo{}, fmt.Errorf("session for %q: store: %w", u.Name, err)
	}
	ls := &liveSession{rec: rec, persisted: now, done: make(chan struct{})}
	s.mu.Lock()
	s.m[id] = ls
	s.mu.Unlock()
	return token, s.info(ls, u), nil
}

func (s *Sessions) info(ls *liveSession, u UserRecord) SessionInfo {
	return SessionInfo{ID: ls.rec.ID, User: u.Name, Realm: u.Realm, Level: u.Level,
		Permissions: slices.Clone(u.Permissions), CSRF: ls.rec.CSRF, Addr: ls.rec.Addr,
		Created: ls.rec.Created, LastSeen: ls.rec.LastSeen,
		IdleExpires: ls.rec.LastSeen.Add(s.opts.Idle), Expires: ls.rec.Created.Add(s.opts.Absolute),
		Done: ls.done}
}

// Lookup returns the session of token and, when touch is set, records the
// use (the idle timeout restarts). It ends the session when it expired or
// its user is gone or disabled. Errors: ErrSessionEnded (wrapped) for every
// token that is not a live session; a store failure otherwise.
func (s *Sessions) Lookup(token string, touch bool) (SessionInfo, error) {
	id, ok := sessionID(token)
	if !ok {
		return SessionInfo{}, ErrSessionEnded
	}
	now := s.opts.Now().UTC()
	s.mu.Lock()
	ls, ok := s.m[id]
	if !ok {
		s.mu.Unlock()
		return SessionInfo{}, ErrSessionEnded
	}
	if s.expired(ls.rec, now) {
		s.endLocked(ls)
		s.mu.Unlock()
		return SessionInfo{}, s.deleteStored(id, ErrSessionEnded)
	}
	rec := ls.rec
	s.mu.Unlock()

	u, err := s.users.User(rec.User)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && u.Disabled):
		s.end(id)
		return SessionInfo{}, s.deleteStored(id, ErrSessionEnded)
	case err != nil:
		return SessionInfo{}, fmt.Errorf("session user %q: %w", rec.User, err)
	}

	var persist *SessionRecord
	s.mu.Lock()
	if _, still := s.m[id]; !still { // revoked meanwhile
		s.mu.Unlock()
		return SessionInfo{}, ErrSessionEnded
	}
	if touch {
		ls.rec.LastSeen = now
		if now.Sub(ls.persisted) >= s.opts.PersistEvery {
			ls.persisted = now
			r := ls.rec
			persist = &r
		}
	}
	info := s.info(ls, u)
	s.mu.Unlock()
	if persist != nil {
		if err := s.store.PutSession(*persist); err != nil {
			return SessionInfo{}, fmt.Errorf("session of %q: store: %w", rec.User, err)
		}
	}
	return info, nil
}

// deleteStored removes id from the store and returns ret, or the store's
// error joined to it.
func (s *Sessions) deleteStored(id string, ret error) error {
	if err := s.store.DeleteSession(id); err != nil {
		return errors.Join(ret, fmt.Errorf("session: store: %w", err))
	}
	return ret
}

func (s *Sessions) endLocked(ls *liveSession) {
	if _, ok := s.m[ls.rec.ID]; ok {
		delete(s.m, ls.rec.ID)
		close(ls.done)
	}
}

func (s *Sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls, ok := s.m[id]; ok {
		s.endLocked(ls)
	}
}

// StillValid refuses (a *DeniedError of kind "revoked") a grant made from a
// browser session (Grant.SessionID) once that session ended: logout,
// revocation, its user disabled or deleted, or a timeout. A grant without
// a session passes. It does not restart the idle timeout. A script started
// from a panel thus stops at its next system.* call after its session
// ended, as one started with a revoked API key does (Keys.StillValid).
func (s *Sessions) StillValid(g Grant) error {
	if g.SessionID == "" {
		return nil
	}
	s.mu.Lock()
	ls, ok := s.m[g.SessionID]
	live := ok && !s.expired(ls.rec, s.opts.Now().UTC())
	s.mu.Unlock()
	if !live {
		return &DeniedError{Kind: "revoked", Need: "a current credential: the LiveView session " + shortID(g.SessionID) + " ended"}
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Logout ends the session of token; an unknown token is not an error.
func (s *Sessions) Logout(token string) error {
	id, ok := sessionID(token)
	if !ok {
		return nil
	}
	s.end(id)
	return s.deleteStored(id, nil)
}

// RevokeUser ends every session of user at once (password changed, user
// disabled) and returns how many ended.
func (s *Sessions) RevokeUser(user string) (int, error) {
	s.mu.Lock()
	var ids []string
	for id, ls := range s.m {
		if ls.rec.User == user {
			s.endLocked(ls)
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := s.store.DeleteSession(id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return len(ids), fmt.Errorf("sessions of %q: store: %w", user, errors.Join(errs...))
	}
	return len(ids), nil
}

// Sweep ends the sessions that expired (closing their Done channels, so
// open WebSockets close) and returns how many. The daemon calls it
// periodically.
func (s *Sessions) Sweep() (int, error) {
	now := s.opts.Now().UTC()
	s.mu.Lock()
	var ids []string
	for id, ls := range s.m {
		if s.expired(ls.rec, now) {
			s.endLocked(ls)
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := s.store.DeleteSession(id); err != nil {
			errs = append(errs, err)
		}
	}
	return len(ids), errors.Join(errs...)
}

// Count returns the number of live sessions.
func (s *Sessions) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
