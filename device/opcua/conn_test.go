package opcua

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

func TestBackoff_CappedWithJitter(t *testing.T) {
	lo, hi := 100*time.Millisecond, time.Second
	for n := 1; n <= 10; n++ {
		w := min(lo<<(n-1), hi)
		for range 50 {
			got := backoff(lo, hi, n, io.EOF)
			if got < w/2 || got > w {
				t.Fatalf("backoff(n=%d) = %s, want in [%s, %s]", n, got, w/2, w)
			}
		}
	}
}

// C15: BadTooManySessions waits at least 5 × the minimum, doubling to the
// cap.
func TestBackoff_C15TooManySessions(t *testing.T) {
	err := fmt.Errorf("create session: %w", ua.StatusBadTooManySessions)
	lo, hi := time.Second, 60*time.Second
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 5: 60 * time.Second, 9: 60 * time.Second} {
		for range 20 {
			got := backoff(lo, hi, n, err)
			if got < want/2 || got > want {
				t.Errorf("backoff(n=%d, BadTooManySessions) = %s, want in [%s, %s]", n, got, want/2, want)
			}
		}
	}
}

func endpoint(policy string, mode ua.MessageSecurityMode, level uint8, toks ...*ua.UserTokenPolicy) *ua.EndpointDescription {
	return &ua.EndpointDescription{SecurityPolicyURI: policy, SecurityMode: mode, SecurityLevel: level, UserIdentityTokens: toks}
}

// The configured policy and mode are chosen exactly; a server without them
// is refused, never served a weaker endpoint.
func TestSelectEndpoint_NeverWeaker(t *testing.T) {
	eps := []*ua.EndpointDescription{
		endpoint(ua.SecurityPolicyURINone, ua.MessageSecurityModeNone, 0),
		endpoint(ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSign, 2),
		endpoint(ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt, 3),
		endpoint(ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt, 9),
	}
	ep, err := selectEndpoint(eps, ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt)
	if err != nil || ep.SecurityLevel != 9 {
		t.Errorf("selectEndpoint = %+v, %v; want the SignAndEncrypt endpoint with the highest level", ep, err)
	}
	_, err = selectEndpoint(eps, ua.SecurityPolicyURIAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt)
	var qe *device.QualityError
	if !errors.As(err, &qe) || qe.Quality != value.BadConfigurationError || !strings.Contains(err.Error(), "Basic256Sha256/MessageSecurityModeSign") && !strings.Contains(err.Error(), "offers") {
		t.Errorf("missing policy: %v, want Bad_ConfigurationError listing the offers", err)
	}
}

func TestTokenPolicy_UsernameRules(t *testing.T) {
	user := func(id, pol string) *ua.UserTokenPolicy {
		return &ua.UserTokenPolicy{PolicyID: id, TokenType: ua.UserTokenTypeUserName, SecurityPolicyURI: pol}
	}
	anon := &ua.UserTokenPolicy{PolicyID: "anonymous", TokenType: ua.UserTokenTypeAnonymous}
	for _, tc := range []struct {
		name       string
		ep         *ua.EndpointDescription
		typ        ua.UserTokenType
		wantID     string
		wantPolicy string
		wantErr    string
	}{
		{"clear over None refused", endpoint(ua.SecurityPolicyURINone, ua.MessageSecurityModeNone, 0, user("u", "")),
			ua.UserTokenTypeUserName, "", "", "in clear"},
		{"explicit None token over Sign refused", endpoint(ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSign, 0, user("u", ua.SecurityPolicyURINone)),
			ua.UserTokenTypeUserName, "", "", "in clear"},
		{"encrypting token over None allowed, strongest first", endpoint(ua.SecurityPolicyURINone, ua.MessageSecurityModeNone, 0,
			user("b256", ua.SecurityPolicyURIBasic256), user("sha", ua.SecurityPolicyURIBasic256Sha256), user("clear", "")),
			ua.UserTokenTypeUserName, "sha", ua.SecurityPolicyURIBasic256Sha256, ""},
		{"channel policy over Sign encrypts", endpoint(ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSign, 0, user("u", "")),
			ua.UserTokenTypeUserName, "u", ua.SecurityPolicyURIBasic256Sha256, ""},
		{"None token over SignAndEncrypt allowed", endpoint(ua.SecurityPolicyURIBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt, 0, user("u", ua.SecurityPolicyURINone)),
			ua.UserTokenTypeUserName, "u", ua.SecurityPolicyURINone, ""},
		{"anonymous", endpoint(ua.SecurityPolicyURINone, ua.MessageSecurityModeNone, 0, anon),
			ua.UserTokenTypeAnonymous, "anonymous", ua.SecurityPolicyURINone, ""},
		{"no anonymous token", endpoint(ua.SecurityPolicyURINone, ua.MessageSecurityModeNone, 0, user("u", ua.SecurityPolicyURIBasic256Sha256)),
			ua.UserTokenTypeAnonymous, "", "", "no anonymous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, pol, err := tokenPolicy(tc.ep, tc.typ)
			if tc.wantErr != "" {
				var qe *device.QualityError
				if !errors.As(err, &qe) || qe.Quality != value.BadConfigurationError || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("tokenPolicy = %v, want Bad_ConfigurationError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || tok.PolicyID != tc.wantID || pol != tc.wantPolicy {
				t.Errorf("tokenPolicy = %+v %s %v, want %s %s", tok, pol, err, tc.wantID, tc.wantPolicy)
			}
		})
	}
}

func TestIsConnErr_Classification(t *testing.T) {
	for _, tc := range []struct {
		err  error
		conn bool
		sess bool
	}{
		{io.EOF, true, false},
		{fmt.Errorf("read: %w", ua.StatusBadSessionIDInvalid), true, true},
		{ua.StatusBadSessionClosed, true, true},
		{ua.StatusBadSecureChannelClosed, true, false},
		{ua.StatusBadTimeout, false, false},
		{ua.StatusBadTooManyOperations, false, false},
		{ua.StatusBadNodeIDUnknown, false, false},
		{context.DeadlineExceeded, false, false},
		{context.Canceled, false, false},
		{errors.New("sechan: secure channel not open."), true, false},
	} {
		if got := isConnErr(tc.err); got != tc.conn {
			t.Errorf("isConnErr(%v) = %v, want %v", tc.err, got, tc.conn)
		}
		if got := isSessionErr(tc.err); got != tc.sess {
			t.Errorf("isSessionErr(%v) = %v, want %v", tc.err, got, tc.sess)
		}
	}
}

func TestClassifyConnErr_States(t *testing.T) {
	for _, tc := range []struct {
		err   error
		state string
		q     value.Quality
	}{
		{&untrustedError{thumb: "ab", detail: "x"}, StateUntrusted, value.BadCertificateUntrusted},
		{device.Errorf(value.BadConfigurationError, "refusing to send the password in clear"), StateRefused, value.BadConfigurationError},
		{fmt.Errorf("activate session: %w", ua.StatusBadIdentityTokenRejected), StateRefused, value.BadUserAccessDenied},
		{fmt.Errorf("create session: %w", ua.StatusBadTooManySessions), "connecting", value.BadNotConnected},
		{errors.New("dial tcp: connection refused"), "connecting", value.BadNotConnected},
	} {
		st, q, why, _ := classifyConnErr(tc.err)
		if st != tc.state || q != tc.q || why == "" {
			t.Errorf("classifyConnErr(%v) = %s %s %q, want %s %s", tc.err, st, q, why, tc.state, tc.q)
		}
	}
	_, _, why, _ := classifyConnErr(&untrustedError{thumb: "ab", detail: "x"})
	if why != "certificate not trusted" {
		t.Errorf("untrusted reason %q", why)
	}
}

// Without Open, every call answers with a quality, never a panic.
func TestDriver_NotOpened(t *testing.T) {
	c := DefaultConfig
	c.URL, c.PKIDir = "opc.tcp://127.0.0.1:1", t.TempDir()
	d := NewDriver("ua1", c, nil)
	p := device.Point{Tag: "x", Address: "ns=2;s=X", Type: value.Auto}
	if v := d.Read(context.Background(), []device.Point{p})[0]; v.Quality != value.BadNotConnected {
		t.Errorf("Read = %s", v.Quality)
	}
	var qe *device.QualityError
	if err := devicetest.Write(context.Background(), d, p, 1); !errors.As(err, &qe) || qe.Quality != value.BadNotConnected {
		t.Errorf("Write = %v", err)
	}
	if _, err := d.Browse(context.Background(), ""); !errors.As(err, &qe) {
		t.Errorf("Browse = %v", err)
	}
	if st, _ := d.State(); st != "disconnected" {
		t.Errorf("State = %s", st)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if err := d.Subscribe(context.Background(), []device.Point{p}, func(int, value.VQT) {}); err == nil {
		t.Error("Subscribe after Close = nil")
	}
}

// A server that is away: Open still succeeds, reads say Bad_NotConnected
// with the reason, and State says connecting.
func TestDriver_Open_ServerAway(t *testing.T) {
	c := DefaultConfig
	c.URL, c.PKIDir = fmt.Sprintf("opc.tcp://127.0.0.1:%d", freePort(t)), t.TempDir()
	c.Timeout = device.Duration(500 * time.Millisecond)
	c.ReconnectMin, c.ReconnectMax = device.Duration(50*time.Millisecond), device.Duration(200*time.Millisecond)
	d := openDriver(t, c)
	if st, why := d.State(); st != "connecting" || !strings.Contains(why, "refused") {
		t.Errorf("State = %s %q, want connecting with the dial error", st, why)
	}
	r := newRecorder()
	if err := d.Subscribe(t.Context(), []device.Point{{Tag: "x", Address: "ns=2;s=X", Type: value.Auto}, {Tag: "y", Address: "bad", Type: value.Auto}}, r.fn); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.last(0); v.Quality != value.BadNotConnected {
		t.Errorf("subscribed point while away: %s, want Bad_NotConnected", v.Quality)
	}
	if v, _ := r.last(1); v.Quality != value.BadConfigurationError {
		t.Errorf("subscribed bad address: %s, want Bad_ConfigurationError", v.Quality)
	}
}
