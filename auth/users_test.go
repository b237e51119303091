package auth

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// cheap keeps argon2id fast in tests; the format and the code path are the
// same as with DefaultPasswordParams.
var cheap = PasswordParams{Time: 1, MemoryKiB: 64, Threads: 1, SaltLen: 16, KeyLen: 32}

type memUsers struct {
	mu sync.Mutex
	m  map[string]UserRecord
}

func newMemUsers() *memUsers { return &memUsers{m: map[string]UserRecord{}} }

func (s *memUsers) PutUser(u UserRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[u.Name] = u
	return nil
}

func (s *memUsers) User(name string) (UserRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.m[name]
	if !ok {
		return UserRecord{}, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	return u, nil
}

func (s *memUsers) Users() ([]UserRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []UserRecord
	for _, u := range s.m {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newUsers(t *testing.T) (*Users, *memUsers, *clock) {
	t.Helper()
	st := newMemUsers()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return NewUsers(st, UsersOptions{Params: cheap, MaxFailures: 3, Window: time.Minute,
		LockBase: 10 * time.Second, LockMax: 40 * time.Second, Now: c.Now}), st, c
}

func TestHashPassword_VerifyRoundTrip(t *testing.T) {
	h, err := HashPassword("correct horse", cheap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash %q is not a PHC argon2id string", h)
	}
	for _, c := range []struct {
		pw   string
		want bool
	}{{"correct horse", true}, {"correct horsE", false}, {"", false}} {
		ok, err := VerifyPassword(h, c.pw)
		if err != nil || ok != c.want {
			t.Errorf("VerifyPassword(%q) = %v, %v; want %v", c.pw, ok, err, c.want)
		}
	}
	h2, _ := HashPassword("correct horse", cheap)
	if h2 == h {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
}

func TestVerifyPassword_MalformedHash(t *testing.T) {
	for _, h := range []string{"", "plain", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=18$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=999999999,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=64,t=1,p=1$!!$a2V5"} {
		t.Run(h, func(t *testing.T) {
			if _, err := VerifyPassword(h, "x"); !errors.Is(err, ErrInvalidUser) {
				t.Errorf("err = %v, want ErrInvalidUser", err)
			}
		})
	}
}

func TestCheckUser_Table(t *testing.T) {
	cases := []struct {
		name string
		u    UserRecord
		ok   bool
	}{
		{"platform", UserRecord{Name: "eng", Realm: RealmPlatform, Permissions: []Permission{Designer, UsersAdmin}}, true},
		{"operator", UserRecord{Name: "op.1", Realm: RealmOperator, Level: LevelSupervise}, true},
		{"operator design level", UserRecord{Name: "op", Realm: RealmOperator, Level: LevelDesign}, false},
		{"operator no level", UserRecord{Name: "op", Realm: RealmOperator}, false},
		{"operator with permission", UserRecord{Name: "op", Realm: RealmOperator, Level: LevelView, Permissions: []Permission{Designer}}, false},
		{"platform with level", UserRecord{Name: "eng", Realm: RealmPlatform, Level: LevelOperate}, false},
		{"unknown permission", UserRecord{Name: "eng", Realm: RealmPlatform, Permissions: []Permission{"root"}}, false},
		{"unknown realm", UserRecord{Name: "x", Realm: "partner", Level: LevelView}, false},
		{"bad name", UserRecord{Name: "a b", Realm: RealmOperator, Level: LevelView}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckUser(c.u)
			if (err == nil) != c.ok {
				t.Fatalf("CheckUser = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidUser) {
				t.Errorf("err %v does not wrap ErrInvalidUser", err)
			}
		})
	}
}

func TestUsers_Add_DuplicateAndShortPassword(t *testing.T) {
	us, st, _ := newUsers(t)
	op := UserRecord{Name: "op", Realm: RealmOperator, Level: LevelOperate}
	if err := us.Add(op, "short"); !errors.Is(err, ErrInvalidUser) {
		t.Fatalf("short password: %v", err)
	}
	if err := us.Add(op, "long enough"); err != nil {
		t.Fatal(err)
	}
	if err := us.Add(op, "long enough"); !errors.Is(err, ErrUserExists) {
		t.Fatalf("duplicate: %v", err)
	}
	stored, _ := st.User("op")
	if strings.Contains(stored.Hash, "long enough") || !strings.HasPrefix(stored.Hash, "$argon2id$") {
		t.Fatalf("stored hash %q", stored.Hash)
	}
}

func TestUsers_Login_GoodBadDisabled(t *testing.T) {
	us, _, _ := newUsers(t)
	if err := us.Add(UserRecord{Name: "op", Realm: RealmOperator, Level: LevelOperate}, "password1"); err != nil {
		t.Fatal(err)
	}
	if u, err := us.Login("op", "password1", "10.0.0.1"); err != nil || u.Level != LevelOperate {
		t.Fatalf("good login: %+v %v", u, err)
	}
	if _, err := us.Login("op", "password2", "10.0.0.1"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("bad password: %v", err)
	}
	if _, err := us.Login("nobody", "password1", "10.0.0.1"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown user: %v", err)
	}
	if err := us.Disable("op"); err != nil {
		t.Fatal(err)
	}
	if _, err := us.Login("op", "password1", "10.0.0.2"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("disabled user: %v", err)
	}
	if err := us.SetPassword("nobody", "password1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("passwd unknown: %v", err)
	}
}

// TestUsers_Login_ThrottledPerUserAndAddress: failures of a name from one
// address delay that name from that address only; the rightful user logs
// in from another address at once, with the right password (issue: 5
// failures used to lock the user out everywhere).
func TestUsers_Login_ThrottledPerUserAndAddress(t *testing.T) {
	us, _, c := newUsers(t)
	if err := us.Add(UserRecord{Name: "op", Realm: RealmOperator, Level: LevelView}, "password1"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := us.Login("op", "wrong-pass", "203.0.113.9"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	// The attacker's address waits, even with the right password.
	_, err := us.Login("op", "password1", "203.0.113.9")
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 10*time.Second {
		t.Fatalf("from the failing address after 3 failures: %v, want RateLimitedError of 10s", err)
	}
	// The operator, from the panel's address, is not locked out.
	if _, err := us.Login("op", "password1", "10.0.0.20"); err != nil {
		t.Fatalf("the rightful user from another address: %v, want logged in", err)
	}
	// Another name from the failing address is not delayed either (the
	// address's own counter allows 4 × MaxFailures).
	if _, err := us.Login("someone", "x", "203.0.113.9"); errors.As(err, &rl) {
		t.Fatalf("another name from the failing address: %v, want only a wrong password", err)
	}
	c.Add(11 * time.Second)
	if _, err := us.Login("op", "password1", "203.0.113.9"); err != nil {
		t.Fatalf("after the delay: %v", err)
	}
	// The success forgot the pair's failures: one more failure is free.
	if _, err := us.Login("op", "wrong-pass", "203.0.113.9"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("first failure after a success: %v, want ErrBadCredentials", err)
	}
}

// TestUsers_Login_DelayDoublesToMax: each failure past the free ones
// doubles the delay of the pair, up to LockMax.
func TestUsers_Login_DelayDoublesToMax(t *testing.T) {
	us, _, c := newUsers(t)
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}
	for range 2 {
		_, _ = us.Login("ghost", "wrong-pass", "198.51.100.1")
	}
	for i, w := range want {
		_, _ = us.Login("ghost", "wrong-pass", "198.51.100.1")
		_, err := us.Login("ghost", "wrong-pass", "198.51.100.1")
		var rl *RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != w {
			t.Fatalf("strike %d: %v, want a delay of %s", i+3, err, w)
		}
		if _, err := us.Login("ghost", "wrong-pass", "198.51.100.2"); errors.As(err, &rl) {
			t.Fatalf("strike %d: the name is delayed from another address too: %v", i+3, err)
		}
		c.Add(w)
	}
}

func TestUsers_Login_RateLimitedPerAddress(t *testing.T) {
	us, _, _ := newUsers(t)
	// 4 × MaxFailures failures from one address over many names lock the address.
	for i := range 12 {
		_, _ = us.Login(fmt.Sprintf("guess%d", i), "wrong-pass", "192.0.2.7")
	}
	var rl *RateLimitedError
	if _, err := us.Login("someone", "x", "192.0.2.7"); !errors.As(err, &rl) {
		t.Fatalf("address not locked: %v", err)
	}
	if _, err := us.Login("someone", "x", "192.0.2.8"); errors.As(err, &rl) {
		t.Fatalf("another address locked too: %v", err)
	}
}

func TestUsers_Seed_CreatesOnceWithGivenHash(t *testing.T) {
	us, st, _ := newUsers(t)
	h, _ := HashPassword("seeded-pass", cheap)
	u := UserRecord{Name: "kiosk", Realm: RealmOperator, Level: LevelView, Hash: h}
	if created, err := us.Seed(u); err != nil || !created {
		t.Fatalf("seed: %v %v", created, err)
	}
	if err := us.SetPassword("kiosk", "changed-pass"); err != nil {
		t.Fatal(err)
	}
	if created, err := us.Seed(u); err != nil || created {
		t.Fatalf("second seed: %v %v, want not created", created, err)
	}
	if got, _ := st.User("kiosk"); got.Hash == h {
		t.Error("seed overwrote a changed password")
	}
	if _, err := us.Seed(UserRecord{Name: "bad", Realm: RealmOperator, Level: LevelView, Hash: "plaintext"}); !errors.Is(err, ErrInvalidUser) {
		t.Fatalf("seed with a non-argon2id hash: %v", err)
	}
}

// TestDummyHash_SameCostNoMatch: the hash verified for unknown names has
// the configured costs (so an unknown name takes as long as a known one)
// and matches no password.
func TestDummyHash_SameCostNoMatch(t *testing.T) {
	p := PasswordParams{Time: 1, MemoryKiB: 64, Threads: 1, SaltLen: 16, KeyLen: 32}
	h := dummyHash(p)
	got, salt, key, err := parseHash(h)
	if err != nil {
		t.Fatal(err)
	}
	if got.Time != p.Time || got.MemoryKiB != p.MemoryKiB || got.Threads != p.Threads || len(salt) != 16 || len(key) != 32 {
		t.Errorf("dummy %s: params %+v, salt %d, key %d bytes; want %+v", h, got, len(salt), len(key), p)
	}
	for _, pw := range []string{"", "qubiq-dummy-password", "correct horse"} {
		if ok, err := VerifyPassword(h, pw); ok || err != nil {
			t.Errorf("password %q against the dummy: %v %v", pw, ok, err)
		}
	}
}

// TestRateLimitedError_TextAgreesWithRetryAfter: the text's wait is the
// Retry-After header's whole seconds, rounded up (1.4 s is 2, never 1:
// a client that waited 1 s would be refused again), at least 1.
func TestRateLimitedError_TextAgreesWithRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]int{1400 * time.Millisecond: 2, 2 * time.Second: 2, 2001 * time.Millisecond: 3, 0: 1, 300 * time.Millisecond: 1} {
		e := &RateLimitedError{RetryAfter: d}
		if e.Seconds() != want || e.Error() != fmt.Sprintf("too many failed logins; retry in %ds", want) {
			t.Errorf("%s: %d %q; want %d", d, e.Seconds(), e.Error(), want)
		}
	}
}
