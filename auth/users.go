package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
)

// UserRecord is a person who logs in with a password (README: Operators and
// LiveView panels): an engineer of the platform realm, who holds
// Permissions (designer, sandbox_admin, users_admin, firmware), or an
// operator of the operator realm, who holds a Level (view, operate or
// supervise) and no permission. Hash is the argon2id hash of the password in
// PHC string form ("$argon2id$v=19$m=...,t=...,p=...$salt$key"); the
// password itself is never kept. A disabled user cannot log in and loses
// every open session.
type UserRecord struct {
	Name        string
	Realm       Realm
	Level       Level
	Permissions []Permission
	Hash        string
	Disabled    bool
	Created     time.Time
	Changed     time.Time // when the password was last set
}

// UserStore persists users. The service layer passes the store's implementation.
// User returns an error wrapping ErrNotFound for an unknown name.
type UserStore interface {
	PutUser(u UserRecord) error
	User(name string) (UserRecord, error)
	Users() ([]UserRecord, error)
}

// Errors of Users. Compare with errors.Is.
var (
	// ErrUserExists is returned by Users.Add for a name already taken
	// (disabled users keep their name).
	ErrUserExists = errors.New("user already exists")

	// ErrInvalidUser is wrapped when a user's name, realm, level,
	// permissions or password are not acceptable; the message names which.
	ErrInvalidUser = errors.New("invalid user")
)

// RateLimitedError is returned by Users.Login while logins of a user name
// from a client address, or every login from an address, are throttled
// after repeated failures. RetryAfter is how long until the next attempt
// is considered. It never says whether the name exists.
type RateLimitedError struct {
	RetryAfter time.Duration
}

// Seconds is RetryAfter in whole seconds, rounded up and at least 1: the
// Retry-After header's value (RFC 9110 §10.2.3 takes whole seconds), so
// a client that waits it is not refused again.
func (e *RateLimitedError) Seconds() int {
	s := e.RetryAfter / time.Second
	if e.RetryAfter%time.Second != 0 {
		s++
	}
	return max(int(s), 1)
}

// Error says to wait, in the same whole seconds as Seconds (the header):
// "too many failed logins; retry in 2s".
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many failed logins; retry in %ds", e.Seconds())
}

// PasswordParams are the argon2id cost parameters (RFC 9106). MemoryKiB is
// in KiB.
type PasswordParams struct {
	Time      uint32
	MemoryKiB uint32
	Threads   uint8
	SaltLen   uint32
	KeyLen    uint32
}

// DefaultPasswordParams follow the OWASP Password Storage Cheat Sheet's
// first argon2id configuration (m=19 MiB, t=2, p=1): about 50 ms on one
// core of an appliance-class CPU, so a login burst cannot starve the scan
// loops.
var DefaultPasswordParams = PasswordParams{Time: 2, MemoryKiB: 19 * 1024, Threads: 1, SaltLen: 16, KeyLen: 32}

// MinPasswordLen is the shortest password Users accepts (NIST SP 800-63B
// §5.1.1.2: at least 8 characters).
const MinPasswordLen = 8

// HashPassword returns the argon2id PHC string of password with a fresh
// random salt.
func HashPassword(password string, p PasswordParams) (string, error) {
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password hash: random salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, p.KeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// maxHashMemoryKiB bounds the memory a stored hash may ask for (a seeded
// hash is project data: it must not make a login allocate gigabytes).
const maxHashMemoryKiB = 256 * 1024

// VerifyPassword reports whether password matches the argon2id PHC string
// hash, in constant time. A malformed hash is an error wrapping
// ErrInvalidUser.
func VerifyPassword(hash, password string) (bool, error) {
	p, salt, key, err := parseHash(hash)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

func parseHash(hash string) (PasswordParams, []byte, []byte, error) {
	var p PasswordParams
	bad := func(why string) (PasswordParams, []byte, []byte, error) {
		return p, nil, nil, fmt.Errorf("%w: password hash is not an argon2id PHC string: %s", ErrInvalidUser, why)
	}
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return bad(`want "$argon2id$v=19$m=...,t=...,p=...$salt$key"`)
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return bad("version " + parts[2])
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return bad("parameters " + parts[3])
	}
	if p.Time == 0 || p.Threads == 0 || p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxHashMemoryKiB || p.Time > 16 {
		return bad("parameters out of range " + parts[3])
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return bad("salt")
	}
	key, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return bad("key")
	}
	return p, salt, key, nil
}

// userName is a user name: a letter or digit, then letters, digits, ".",
// "_", "-" or "@", at most 64 characters.
var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// CheckUser validates the realm-dependent fields of u: a valid name; the
// platform realm with known permissions and no level; or the operator realm
// with level view, operate or supervise and no permission. The error wraps
// ErrInvalidUser and names the field.
func CheckUser(u UserRecord) error {
	if !userName.MatchString(u.Name) {
		return fmt.Errorf("%w: name %q: want a letter or digit, then letters, digits, '.', '_', '-' or '@' (at most 64)", ErrInvalidUser, u.Name)
	}
	switch u.Realm {
	case RealmPlatform:
		if u.Level != LevelNone {
			return fmt.Errorf("%w: user %q: platform users hold permissions, not a level", ErrInvalidUser, u.Name)
		}
		for _, p := range u.Permissions {
			if _, err := ParsePermission(string(p)); err != nil {
				return fmt.Errorf("%w: user %q: %v", ErrInvalidUser, u.Name, err)
			}
		}
	case RealmOperator:
		if u.Level == LevelNone {
			return fmt.Errorf("%w: user %q: missing level: an operator's level is view, operate or supervise", ErrInvalidUser, u.Name)
		}
		if u.Level < LevelView || u.Level > LevelSupervise {
			return fmt.Errorf("%w: user %q: an operator's level is view, operate or supervise, not %q", ErrInvalidUser, u.Name, u.Level)
		}
		if len(u.Permissions) > 0 {
			return fmt.Errorf("%w: user %q: operators hold no permissions", ErrInvalidUser, u.Name)
		}
	default:
		return fmt.Errorf("%w: user %q: realm %q: want platform or operator", ErrInvalidUser, u.Name, u.Realm)
	}
	return nil
}

// UsersOptions configures Users. Zero fields take DefaultUsersOptions.
type UsersOptions struct {
	// Params are the argon2id costs of new hashes.
	Params PasswordParams
	// MaxFailures is how many failed logins of one user name from one
	// client address are free within Window; from then on each attempt
	// of that name from that address waits a growing delay. An address
	// gets four times as many over all names (a shared panel's users
	// mistype too) before its every attempt waits. Failures never delay
	// a name from another address: whoever knows an operator's name
	// cannot keep the operator out (docs/security.md, "Login
	// throttling").
	MaxFailures int
	// Window is how long failures are remembered after the last one.
	Window time.Duration
	// LockBase is the first delay; each further failure doubles it, up
	// to LockMax.
	LockBase time.Duration
	LockMax  time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultUsersOptions: 5 failures per user name and address (20 per
// address) within 15 min are free, then a delay of 2 s doubling up to
// 5 min before each further attempt.
var DefaultUsersOptions = UsersOptions{Params: DefaultPasswordParams, MaxFailures: 5,
	Window: 15 * time.Minute, LockBase: 2 * time.Second, LockMax: 5 * time.Minute}

// Users manages users and checks passwords (README: Operators and
// LiveView panels). Login is throttled per user name and client address,
// and per address. It is safe for concurrent use.
type Users struct {
	store UserStore
	opts  UsersOptions
	lim   *limiter
	dummy string // hash verified for unknown names, so timing does not tell

	mu sync.Mutex // serialises read-modify-write of records
}

// NewUsers returns Users over store.
func NewUsers(store UserStore, opts UsersOptions) *Users {
	d := DefaultUsersOptions
	if opts.Params.Time == 0 {
		opts.Params = d.Params
	}
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = d.MaxFailures
	}
	if opts.Window <= 0 {
		opts.Window = d.Window
	}
	if opts.LockBase <= 0 {
		opts.LockBase = d.LockBase
	}
	if opts.LockMax <= 0 {
		opts.LockMax = d.LockMax
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	u := &Users{store: store, opts: opts, lim: newLimiter(opts)}
	u.dummy = dummyHash(opts.Params)
	return u
}

// dummyHash returns a well-formed hash of params p with a random salt and
// a random key: verifying any password against it costs what verifying
// against a real hash of p costs, and matches none (the key is no
// password's). It costs nothing to make: hashing a dummy password would
// spend a full argon2id run and its MemoryKiB at every start.
func dummyHash(p PasswordParams) string {
	salt, key := make([]byte, max(p.SaltLen, 8)), make([]byte, min(max(p.KeyLen, 16), 64))
	_, _ = rand.Read(salt)
	_, _ = rand.Read(key)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads,
		enc.EncodeToString(salt), enc.EncodeToString(key))
}

// CheckPassword validates a new password of the user name: at least
// MinPasswordLen characters, at most 1024 bytes. The error wraps
// ErrInvalidUser and says which bound.
func CheckPassword(name, pw string) error {
	if len([]rune(pw)) < MinPasswordLen {
		return fmt.Errorf("%w: user %q: password shorter than %d characters", ErrInvalidUser, name, MinPasswordLen)
	}
	if len(pw) > 1024 {
		return fmt.Errorf("%w: user %q: password longer than 1024 bytes", ErrInvalidUser, name)
	}
	return nil
}

// Add creates the user u with password. u.Hash, Created, Changed and
// Disabled are set here. Errors: ErrInvalidUser (named field),
// ErrUserExists, or the store's.
func (us *Users) Add(u UserRecord, password string) error {
	if err := CheckUser(u); err != nil {
		return err
	}
	if err := CheckPassword(u.Name, password); err != nil {
		return err
	}
	h, err := HashPassword(password, us.opts.Params)
	if err != nil {
		return err
	}
	u.Hash, u.Disabled = h, false
	u.Permissions = slices.Clone(u.Permissions)
	return us.create(u)
}

// Seed creates u with its given Hash (a project's seed user) unless the
// name exists; it reports whether it created it. The hash must be an
// argon2id PHC string.
func (us *Users) Seed(u UserRecord) (bool, error) {
	if err := CheckUser(u); err != nil {
		return false, err
	}
	if _, _, _, err := parseHash(u.Hash); err != nil {
		return false, fmt.Errorf("user %q: %w", u.Name, err)
	}
	err := us.create(u)
	if errors.Is(err, ErrUserExists) {
		return false, nil
	}
	return err == nil, err
}

func (us *Users) create(u UserRecord) error {
	us.mu.Lock()
	defer us.mu.Unlock()
	if _, err := us.store.User(u.Name); err == nil {
		return fmt.Errorf("user %q: %w", u.Name, ErrUserExists)
	} else if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("user %q: %w", u.Name, err)
	}
	now := us.opts.Now().UTC()
	u.Created, u.Changed = now, now
	if err := us.store.PutUser(u); err != nil {
		return fmt.Errorf("user %q: store: %w", u.Name, err)
	}
	return nil
}

// SetPassword replaces the password of name (the caller revokes the user's
// sessions). An unknown name wraps ErrNotFound.
func (us *Users) SetPassword(name, password string) error {
	if err := CheckPassword(name, password); err != nil {
		return err
	}
	h, err := HashPassword(password, us.opts.Params)
	if err != nil {
		return err
	}
	return us.update(name, func(u *UserRecord) {
		u.Hash = h
		u.Changed = us.opts.Now().UTC()
	})
}

// Disable disables name: it can no longer log in (the caller revokes its
// sessions). Disabling a disabled user is not an error; an unknown name
// wraps ErrNotFound.
func (us *Users) Disable(name string) error {
	return us.update(name, func(u *UserRecord) { u.Disabled = true })
}

func (us *Users) update(name string, fn func(u *UserRecord)) error {
	us.mu.Lock()
	defer us.mu.Unlock()
	u, err := us.store.User(name)
	if err != nil {
		return fmt.Errorf("user %q: %w", name, err)
	}
	fn(&u)
	if err := us.store.PutUser(u); err != nil {
		return fmt.Errorf("user %q: store: %w", name, err)
	}
	return nil
}

// User returns the stored record of name (ErrNotFound wrapped when none).
func (us *Users) User(name string) (UserRecord, error) { return us.store.User(name) }

// List returns every user, disabled ones included, hashes included
// (callers must not expose them).
func (us *Users) List() ([]UserRecord, error) { return us.store.Users() }

// Login checks name and password from the client at addr. It returns the
// user on success; ErrBadCredentials for an unknown or disabled name or a
// wrong password (never saying which); a *RateLimitedError while the name
// is throttled from addr, or addr itself is (the password is then not even
// checked). A success forgets the failures of the name from addr.
func (us *Users) Login(name, password, addr string) (UserRecord, error) {
	now := us.opts.Now()
	if wait := us.lim.blocked(now, name, addr); wait > 0 {
		return UserRecord{}, &RateLimitedError{RetryAfter: wait}
	}
	u, err := us.store.User(name)
	hash := u.Hash
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			return UserRecord{}, fmt.Errorf("user %q: %w", name, err)
		}
		hash = us.dummy
	}
	ok, verr := VerifyPassword(hash, password)
	if err != nil || verr != nil || !ok || u.Disabled {
		us.lim.fail(us.opts.Now(), name, addr)
		return UserRecord{}, ErrBadCredentials
	}
	us.lim.succeed(name, addr)
	return u, nil
}

// limiter counts failed logins per (user name, address) and per address.
type limiter struct {
	opts UsersOptions
	mu   sync.Mutex
	m    map[string]*strikes
}

type strikes struct {
	n     int
	last  time.Time
	until time.Time
}

// limiterMax bounds the entries kept; older ones are pruned first.
const limiterMax = 10000

func newLimiter(o UsersOptions) *limiter { return &limiter{opts: o, m: map[string]*strikes{}} }

// keys are the limiter's counters of a login of name from addr: the pair's,
// then the address's. There is no counter of the name alone, so failures
// from one address never delay the name from another.
func (l *limiter) keys(name, addr string) [2]string {
	return [2]string{"p\x00" + addr + "\x00" + name, "a\x00" + addr}
}

// blocked returns how long the pair or the address must still wait (0: none).
func (l *limiter) blocked(now time.Time, name, addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	for _, k := range l.keys(name, addr) {
		if s, ok := l.m[k]; ok && now.Before(s.until) {
			wait = max(wait, s.until.Sub(now))
		}
	}
	return wait
}

func (l *limiter) fail(now time.Time, name, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) >= limiterMax {
		for k, s := range l.m {
			if now.Sub(s.last) > l.opts.Window && !now.Before(s.until) {
				delete(l.m, k)
			}
		}
	}
	for i, k := range l.keys(name, addr) {
		maxF := l.opts.MaxFailures
		if i == 1 {
			maxF *= 4
		}
		s, ok := l.m[k]
		if !ok {
			s = &strikes{}
			l.m[k] = s
		}
		if now.Sub(s.last) > l.opts.Window && !now.Before(s.until) {
			s.n = 0
		}
		s.n++
		s.last = now
		if s.n >= maxF {
			lock := l.opts.LockBase
			for j := maxF; j < s.n && lock < l.opts.LockMax; j++ {
				lock *= 2
			}
			s.until = now.Add(min(lock, l.opts.LockMax))
		}
	}
}

// succeed forgets the failures of name from addr; the address's stay (one
// good account must not reset an address that guesses others).
func (l *limiter) succeed(name, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, l.keys(name, addr)[0])
}
