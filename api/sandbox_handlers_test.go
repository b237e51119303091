package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Tokens of the sandbox tests: sandbox_admin only, designer only.
const (
	tokSandbox  = "tok-sandbox"
	tokDesigner = "tok-designer"
)

type sandboxAuth struct{}

func (sandboxAuth) Authenticate(_ context.Context, bearer string) (auth.Grant, error) {
	switch bearer {
	case tokSandbox:
		return auth.Grant{Principal: "tech", Realm: auth.RealmPlatform, Permissions: []auth.Permission{auth.SandboxAdmin}}, nil
	case tokDesigner:
		return auth.Grant{Principal: "designer", Realm: auth.RealmPlatform, Permissions: []auth.Permission{auth.Designer},
			Scopes: auth.AllScopes, WriteLevel: auth.LevelDesign}, nil
	}
	return auth.Grant{}, fmt.Errorf("token: %w", ErrUnauthenticated)
}

// fakeSandbox records what it was asked and answers from its fields.
type fakeSandbox struct {
	mu       sync.Mutex
	calls    []string
	files    map[string]string // uploaded name → content
	ack      bool
	err      error // returned before any progress
	midErr   error // returned after two progress events
	widening []gateway.PackageWidening
}

func (f *fakeSandbox) rec(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeSandbox) SandboxConfig(context.Context) (json.RawMessage, error) {
	f.rec("config")
	return json.RawMessage(`{"index_url":"","linter":"syntax-only"}`), nil
}

func (f *fakeSandbox) ListPackages(context.Context) ([]gateway.Package, error) {
	f.rec("list")
	return []gateway.Package{{Name: "qubiq-testpkg", Version: "1.0", Imports: []string{"qtestpkg"}, Requested: true}}, nil
}

func (f *fakeSandbox) change(action string, progress func(gateway.PackageProgress), ack bool) (gateway.PackageChange, error) {
	if f.err != nil {
		return gateway.PackageChange{}, f.err
	}
	if !ack {
		return gateway.PackageChange{}, &WideningError{Widenings: f.widening}
	}
	progress(gateway.PackageProgress{Step: "pip", Message: "Processing ./qubiq_testpkg-1.0-py3-none-any.whl"})
	progress(gateway.PackageProgress{Step: "swap", Message: "switching"})
	if f.midErr != nil {
		return gateway.PackageChange{}, f.midErr
	}
	return gateway.PackageChange{Action: action, Packages: []string{"qubiq-testpkg"}, Allowed: []string{"math", "qtestpkg"}}, nil
}

func (f *fakeSandbox) InstallPackage(_ context.Context, g auth.Grant, req gateway.PackageInstall,
	progress func(gateway.PackageProgress)) (gateway.PackageChange, error) {
	f.rec("install " + req.Requirement + " by " + g.Principal)
	return f.change("install", progress, req.AcknowledgeWidening)
}

func (f *fakeSandbox) UploadPackages(_ context.Context, g auth.Grant, files WheelFiles, ack func() bool,
	progress func(gateway.PackageProgress)) (gateway.PackageChange, error) {
	for {
		name, r, err := files()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return gateway.PackageChange{}, err
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return gateway.PackageChange{}, err
		}
		f.mu.Lock()
		if f.files == nil {
			f.files = map[string]string{}
		}
		f.files[name] = string(b)
		f.mu.Unlock()
	}
	f.ack = ack()
	f.rec("upload by " + g.Principal)
	return f.change("install", progress, f.ack)
}

func (f *fakeSandbox) RemovePackage(_ context.Context, g auth.Grant, name string) (gateway.PackageChange, error) {
	f.rec("remove " + name + " by " + g.Principal)
	if f.err != nil {
		return gateway.PackageChange{}, f.err
	}
	return gateway.PackageChange{Action: "remove", Packages: []string{name}}, nil
}

func (f *fakeSandbox) CheckIndex(context.Context) gateway.IndexCheck {
	f.rec("check")
	return gateway.IndexCheck{IndexURL: "http://127.0.0.1:1/simple", Reason: "connection refused", DurationMS: 0.4}
}

func sandboxServer(t *testing.T, sb gateway.Packages) *Server {
	t.Helper()
	s, err := New(Config{Now: func() time.Time { return testNow }}, Deps{Auth: sandboxAuth{}, Sandbox: sb}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sbDo(t *testing.T, s *Server, req *http.Request, token string) *httptest.ResponseRecorder {
	t.Helper()
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// events decodes an NDJSON answer.
func events(t *testing.T, rec *httptest.ResponseRecorder) []apitypes.PackageEvent {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != apitypes.NDJSONContentType {
		t.Fatalf("Content-Type %q, body %s", ct, rec.Body)
	}
	var out []apitypes.PackageEvent
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		var ev apitypes.PackageEvent
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// Every sandbox route needs sandbox_admin, reads included; without the
// dependency they answer 501.
func TestSandboxRoutes_NeedSandboxAdmin(t *testing.T) {
	s := sandboxServer(t, &fakeSandbox{})
	for _, rt := range sandboxRoutes {
		path := strings.ReplaceAll(rt.path, "{name}", "x")
		t.Run(rt.method+" "+path, func(t *testing.T) {
			if rt.need.perm != auth.SandboxAdmin {
				t.Fatalf("need %v", rt.need)
			}
			if rec := sbDo(t, s, httptest.NewRequest(rt.method, path, nil), ""); rec.Code != http.StatusUnauthorized {
				t.Errorf("no credentials: %d", rec.Code)
			}
			rec := sbDo(t, s, httptest.NewRequest(rt.method, path, nil), tokDesigner)
			if p := problemOf(t, rec); rec.Code != http.StatusForbidden || !strings.Contains(p.Detail, "sandbox_admin") {
				t.Errorf("designer: %d %+v", rec.Code, p)
			}
		})
	}
	none := sandboxServer(t, nil)
	rec := sbDo(t, none, httptest.NewRequest("GET", "/api/v1/sandbox/packages", nil), tokSandbox)
	if rec.Code != http.StatusNotImplemented {
		t.Errorf("without the dependency: %d %s", rec.Code, rec.Body)
	}
}

func TestSandbox_Reads(t *testing.T) {
	fs := &fakeSandbox{}
	s := sandboxServer(t, fs)
	tests := []struct {
		path, want string
	}{
		{"/api/v1/sandbox/config", `"linter":"syntax-only"`},
		{"/api/v1/sandbox/packages", `"imports":["qtestpkg"]`},
		{"/api/v1/sandbox/check", `"reason":"connection refused"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := sbDo(t, s, httptest.NewRequest("GET", tt.path, nil), tokSandbox)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("%d %s, want %s", rec.Code, rec.Body, tt.want)
			}
		})
	}
}

func TestSandbox_InstallPackage(t *testing.T) {
	widen := []gateway.PackageWidening{{Package: "numpy", Requested: true,
		Widens: []string{"loads native code through ctypes (numpy.ctypeslib.load_library)"}}}
	tests := []struct {
		name       string
		body       string
		fs         *fakeSandbox
		wantStatus int
		wantKind   string // problem kind, or "" for a stream
		wantEvents []string
	}{
		{"not acknowledged: 409 naming what it widens", `{"requirement":"numpy==1.26.4"}`,
			&fakeSandbox{widening: widen}, 409, KindAcknowledgementRequired, nil},
		{"acknowledged: progress then done", `{"requirement":"numpy==1.26.4","acknowledge_widening":true}`,
			&fakeSandbox{}, 200, "", []string{"progress", "progress", "done"}},
		{"refused before it starts: a problem", `{"requirement":"numpy","acknowledge_widening":true}`,
			&fakeSandbox{err: fmt.Errorf("install: %w", ErrPackageConflict)}, 409, KindConflict, nil},
		{"bad requirement", `{"requirement":"x @ http://y","acknowledge_widening":true}`,
			&fakeSandbox{err: fmt.Errorf("bad: %w", ErrInvalid)}, 400, KindInvalid, nil},
		{"failed on the way: an error event", `{"requirement":"numpy","acknowledge_widening":true}`,
			&fakeSandbox{midErr: fmt.Errorf("pip: %w", ErrInstallFailed)}, 200, "", []string{"progress", "progress", "error"}},
		{"missing requirement", `{"acknowledge_widening":true}`, &fakeSandbox{}, 400, KindInvalid, nil},
		{"unknown field", `{"requirement":"numpy","force":true}`, &fakeSandbox{}, 400, KindInvalid, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sandboxServer(t, tt.fs)
			req := httptest.NewRequest("POST", "/api/v1/sandbox/packages", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			rec := sbDo(t, s, req, tokSandbox)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantKind != "" {
				var p apitypes.WideningProblem
				if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Kind != tt.wantKind {
					t.Fatalf("problem %s: %v", rec.Body, err)
				}
				if tt.wantKind == KindAcknowledgementRequired &&
					(len(p.Widenings) != 1 || p.Widenings[0].Package != "numpy" || !strings.Contains(p.Detail, "acknowledge_widening")) {
					t.Errorf("widening problem %+v", p)
				}
				return
			}
			evs := events(t, rec)
			var kinds []string
			for _, e := range evs {
				kinds = append(kinds, e.Event)
			}
			if strings.Join(kinds, ",") != strings.Join(tt.wantEvents, ",") {
				t.Fatalf("events %v, want %v", kinds, tt.wantEvents)
			}
			last := evs[len(evs)-1]
			switch last.Event {
			case "done":
				if last.Result == nil || last.Result.Action != "install" || last.Result.Installed == nil {
					t.Errorf("done %+v", last.Result)
				}
			case "error":
				if last.Error == nil || last.Error.Status != 502 || last.Error.Kind != KindInstallFailed {
					t.Errorf("error %+v", last.Error)
				}
			}
			if !strings.Contains(strings.Join(tt.fs.calls, "|"), "by tech") {
				t.Errorf("the grant's principal did not reach the service: %v", tt.fs.calls)
			}
		})
	}
}

func TestSandbox_UploadPackages(t *testing.T) {
	multipartBody := func(ackField string) (string, *bytes.Buffer) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("wheel", "qubiq_testpkg-1.0-py3-none-any.whl")
		fw.Write([]byte("wheel-1"))
		fw, _ = mw.CreateFormFile("wheel", "qubiq_testdep-1.0-py3-none-any.whl")
		fw.Write([]byte("wheel-2"))
		if ackField != "" {
			mw.WriteField("acknowledge_widening", ackField)
		}
		mw.Close()
		return mw.FormDataContentType(), &buf
	}
	t.Run("multipart, acknowledged by a field after the files", func(t *testing.T) {
		fs := &fakeSandbox{}
		ct, body := multipartBody("true")
		req := httptest.NewRequest("POST", "/api/v1/sandbox/packages/upload", body)
		req.Header.Set("Content-Type", ct)
		rec := sbDo(t, sandboxServer(t, fs), req, tokSandbox)
		if rec.Code != 200 || !fs.ack || fs.files["qubiq_testpkg-1.0-py3-none-any.whl"] != "wheel-1" ||
			fs.files["qubiq_testdep-1.0-py3-none-any.whl"] != "wheel-2" {
			t.Fatalf("%d %s; files %v ack %v", rec.Code, rec.Body, fs.files, fs.ack)
		}
		if evs := events(t, rec); evs[len(evs)-1].Event != "done" {
			t.Errorf("events %+v", evs)
		}
	})
	t.Run("multipart, not acknowledged", func(t *testing.T) {
		fs := &fakeSandbox{widening: []gateway.PackageWidening{{Package: "qubiq-testpkg", Widens: []string{"generic"}}}}
		ct, body := multipartBody("")
		req := httptest.NewRequest("POST", "/api/v1/sandbox/packages/upload", body)
		req.Header.Set("Content-Type", ct)
		rec := sbDo(t, sandboxServer(t, fs), req, tokSandbox)
		if rec.Code != 409 || !strings.Contains(rec.Body.String(), `"widenings":[{"package":"qubiq-testpkg"`) {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	t.Run("raw body with filename, acknowledged in the query", func(t *testing.T) {
		fs := &fakeSandbox{}
		req := httptest.NewRequest("POST",
			"/api/v1/sandbox/packages/upload?filename=qubiq_testpkg-1.0-py3-none-any.whl&acknowledge_widening=true",
			strings.NewReader("raw-wheel"))
		req.Header.Set("Content-Type", "application/octet-stream")
		rec := sbDo(t, sandboxServer(t, fs), req, tokSandbox)
		if rec.Code != 200 || fs.files["qubiq_testpkg-1.0-py3-none-any.whl"] != "raw-wheel" || !fs.ack {
			t.Fatalf("%d %s %v", rec.Code, rec.Body, fs.files)
		}
	})
	t.Run("raw body without a wheel file name", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/api/v1/sandbox/packages/upload?filename=../x.sh", strings.NewReader("x"))
		rec := sbDo(t, sandboxServer(t, &fakeSandbox{}), req, tokSandbox)
		if p := problemOf(t, rec); rec.Code != 400 || !strings.Contains(p.Detail, "filename") {
			t.Errorf("%d %+v", rec.Code, p)
		}
	})
	t.Run("over the route's limit", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/api/v1/sandbox/packages/upload?filename=a-1.0-py3-none-any.whl", strings.NewReader("x"))
		req.ContentLength = MaxWheelUpload + 1
		rec := sbDo(t, sandboxServer(t, &fakeSandbox{}), req, tokSandbox)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%d %s", rec.Code, rec.Body)
		}
	})
	t.Run("a 2 MiB wheel passes where the default 1 MiB limit would refuse it", func(t *testing.T) {
		fs := &fakeSandbox{}
		big := strings.Repeat("w", 2<<20)
		req := httptest.NewRequest("POST", "/api/v1/sandbox/packages/upload?filename=a-1.0-py3-none-any.whl&acknowledge_widening=1",
			strings.NewReader(big))
		rec := sbDo(t, sandboxServer(t, fs), req, tokSandbox)
		if rec.Code != 200 || len(fs.files["a-1.0-py3-none-any.whl"]) != len(big) {
			t.Errorf("%d %s", rec.Code, rec.Body)
		}
	})
}

func TestSandbox_RemovePackage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"removed", nil, 200},
		{"not installed", fmt.Errorf("remove x: %w", ErrNotFound), 404},
		{"a dependency", fmt.Errorf("remove x: %w", ErrPackageConflict), 409},
		{"pip failed", fmt.Errorf("remove x: %w", ErrInstallFailed), 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &fakeSandbox{err: tt.err}
			rec := sbDo(t, sandboxServer(t, fs), httptest.NewRequest("DELETE", "/api/v1/sandbox/packages/qubiq-testpkg", nil), tokSandbox)
			if rec.Code != tt.want {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if len(fs.calls) != 1 || fs.calls[0] != "remove qubiq-testpkg by tech" {
				t.Errorf("calls %v", fs.calls)
			}
		})
	}
}
