package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

type fakeCredRefusals struct {
	mu  sync.Mutex
	got []string
}

func (f *fakeCredRefusals) AuditCredentialRefusal(_ context.Context, source, target, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, source+" "+target+" "+reason)
}

// TestMiddleware_RefusedCredentialsAudited: a request with a missing,
// unknown or expired bearer token is answered 401 and handed to the
// audit with the client address, the route and the reason; an accepted
// token is not.
func TestMiddleware_RefusedCredentialsAudited(t *testing.T) {
	e := newEnv(t, Config{})
	f := &fakeCredRefusals{}
	e.srv.deps.CredentialRefusals = f
	for _, tok := range []string{"", "qbk_nope", tokExpired, tokReader} {
		req := httptest.NewRequest("GET", "/api/v1/tags", nil)
		req.RemoteAddr = "192.0.2.7:40000"
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		if want := http.StatusUnauthorized; tok != tokReader && rec.Code != want {
			t.Errorf("token %q: %d, want %d", tok, rec.Code, want)
		}
	}
	want := []string{"192.0.2.7 GET /api/v1/tags missing", "192.0.2.7 GET /api/v1/tags unknown", "192.0.2.7 GET /api/v1/tags expired"}
	if !slices.Equal(f.got, want) {
		t.Fatalf("audited %q, want %q", f.got, want)
	}
}

// TestSession_RefusedCookiesAudited: a session cookie naming no current
// session (ended by a logout, or forged) is refused and audited as a
// refused credential with the reason "session", like a bad bearer token.
func TestSession_RefusedCookiesAudited(t *testing.T) {
	e := newLVEnv(t, Config{})
	f := &fakeCredRefusals{}
	e.srv.deps.CredentialRefusals = f
	c, csrf := e.login(t, "op")
	if rec := e.req(t, "POST", "/api/v1/auth/logout", "", c, map[string]string{CSRFHeader: csrf}); rec.Code != 204 {
		t.Fatalf("logout: %d", rec.Code)
	}
	forged := &http.Cookie{Name: c.Name, Value: "forged-session-token"}
	for _, ck := range []*http.Cookie{c, forged} {
		if rec := e.req(t, "GET", "/api/v1/tags", "", ck, nil); rec.Code != http.StatusUnauthorized {
			t.Errorf("cookie %q: %d, want 401", ck.Value, rec.Code)
		}
	}
	want := []string{"192.0.2.1 GET /api/v1/tags session", "192.0.2.1 GET /api/v1/tags session"}
	if !slices.Equal(f.got, want) {
		t.Fatalf("audited %q, want %q", f.got, want)
	}
}
