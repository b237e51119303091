package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// fakeAppliance records what the appliance routes asked and answers as
// told.
type fakeAppliance struct {
	body      string
	force     bool
	keep      bool
	flashErr  error
	status    gateway.FirmwareStatus
	backup    string
	backupErr error
	level     string
	pass      string
}

func (f *fakeAppliance) Flash(_ context.Context, _ auth.Grant, body io.Reader, force bool) (gateway.FlashResult, error) {
	b, _ := io.ReadAll(body)
	f.body, f.force = string(b), force
	if f.flashErr != nil {
		return gateway.FlashResult{}, f.flashErr
	}
	return gateway.FlashResult{Version: "1.1.0", Arch: "amd64", Key: "release", Slot: "b", Size: int64(len(b)), RestartRequired: true}, nil
}

func (f *fakeAppliance) FirmwareStatus(context.Context) (gateway.FirmwareStatus, error) {
	return f.status, nil
}

func (f *fakeAppliance) Backup(_ context.Context, _ auth.Grant, w io.Writer, req gateway.BackupRequest) error {
	f.pass = string(req.Passphrase)
	if _, err := io.WriteString(w, f.backup); err != nil {
		return err
	}
	return f.backupErr
}

func (f *fakeAppliance) StageRestore(_ context.Context, _ auth.Grant, body io.Reader, req gateway.RestoreRequest) (gateway.RestoreStaged, error) {
	b, _ := io.ReadAll(body)
	f.body, f.keep, f.pass = string(b), req.KeepCredentials, string(req.Passphrase)
	return gateway.RestoreStaged{ApplianceID: "old-01", Entries: 3, RestartRequired: true}, nil
}

func (f *fakeAppliance) LogLevel() string { return f.level }

func (f *fakeAppliance) SetLogLevel(_ context.Context, _ auth.Grant, level string) (string, error) {
	if level != "debug" {
		return "", fmt.Errorf("%w: log level %q", gateway.ErrInvalid, level)
	}
	f.level = "DEBUG"
	return f.level, nil
}

func applianceEnv(t *testing.T, f *fakeAppliance) *env {
	e := newEnv(t, Config{})
	e.srv.deps.Appliance = f
	return e
}

func TestFirmwareRoutes_Flash(t *testing.T) {
	f := &fakeAppliance{}
	e := applianceEnv(t, f)
	rec := e.do(t, "POST", "/api/v1/firmware?force=true", tokFull, "BUNDLE")
	var res apitypes.FlashResult
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &res) != nil || res.Slot != "b" || !res.RestartRequired {
		t.Fatalf("flash: %d %s", rec.Code, rec.Body)
	}
	if f.body != "BUNDLE" || !f.force {
		t.Fatalf("the appliance got body %q force %v", f.body, f.force)
	}
	if rec := e.do(t, "POST", "/api/v1/firmware", tokOperator, "BUNDLE"); rec.Code != 403 || !strings.Contains(problemOf(t, rec).Detail, "firmware") {
		t.Fatalf("without the firmware permission: %d %s", rec.Code, rec.Body)
	}
}

// A refused bundle is a problem whose kind is the rule and whose status
// says whose fault it is.
func TestFirmwareRoutes_Refusals(t *testing.T) {
	for kind, status := range map[string]int{"passphrase": 422, "unknown_key": 422, "signature": 422, "hash": 422, "format": 422,
		"arch": 409, "downgrade": 409, "upgrade_path": 409, "busy": 409, "no_slots": 409, "too_large": 413} {
		f := &fakeAppliance{flashErr: &gateway.Refusal{Kind: kind, Err: errors.New("the bundle broke " + kind)}}
		rec := applianceEnv(t, f).do(t, "POST", "/api/v1/firmware", tokFull, "X")
		p := problemOf(t, rec)
		if rec.Code != status || p.Kind != kind || p.Detail != "the bundle broke "+kind {
			t.Errorf("%s: %d %+v", kind, rec.Code, p)
		}
	}
	f := &fakeAppliance{flashErr: errors.New("disk full")}
	if rec := applianceEnv(t, f).do(t, "POST", "/api/v1/firmware", tokFull, "X"); rec.Code != 500 {
		t.Errorf("an appliance failure: %d %s", rec.Code, rec.Body)
	}
	if rec := applianceEnv(t, &fakeAppliance{}).do(t, "POST", "/api/v1/firmware?force=maybe", tokFull, "X"); rec.Code != 400 {
		t.Errorf("force=maybe: %d", rec.Code)
	}
}

func TestFirmwareRoutes_StatusAndHealth(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := gateway.FirmwareStatus{Running: "b", Active: "b", Current: "b", Trial: true, BootCount: 1, BootLimit: 3,
		Slots:   map[string]gateway.SlotStatus{"a": {Version: "1.0.0"}, "b": {Version: "1.1.0"}},
		Last:    &gateway.SlotResult{Time: when, Action: "install", Slot: "b", Version: "1.1.0", OK: true, Message: "installed"},
		History: []gateway.SlotResult{{Time: when, Action: "flash", OK: true}, {Time: when, Action: "install", OK: true}}}
	e := applianceEnv(t, &fakeAppliance{status: st})
	rec := e.do(t, "GET", "/api/v1/firmware", tokFull, "")
	var got apitypes.FirmwareStatus
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
		t.Fatalf("GET /firmware: %d %s", rec.Code, rec.Body)
	}
	if got.Running != "b" || !got.Trial || got.Slots["a"].Version != "1.0.0" || got.Last.Action != "install" || len(got.History) != 2 {
		t.Fatalf("GET /firmware: %+v", got)
	}
	var h struct {
		Firmware *apitypes.FirmwareStatus `json:"firmware"`
	}
	rec = e.do(t, "GET", "/api/v1/health", "", "")
	if json.Unmarshal(rec.Body.Bytes(), &h) != nil || h.Firmware == nil || h.Firmware.Slots["b"].Version != "1.1.0" || h.Firmware.History != nil {
		t.Fatalf("health's firmware member: %s", rec.Body)
	}
	// A development build (no slot it runs from) shows none.
	st.Running = ""
	rec = applianceEnv(t, &fakeAppliance{status: st}).do(t, "GET", "/api/v1/health", "", "")
	if strings.Contains(rec.Body.String(), `"firmware"`) {
		t.Fatalf("health of a daemon outside the slots: %s", rec.Body)
	}
}

func TestFirmwareRoutes_BackupRestore(t *testing.T) {
	f := &fakeAppliance{backup: "BACKUP-BYTES"}
	e := applianceEnv(t, f)
	rec := e.do(t, "POST", "/api/v1/backup", tokFull, "")
	if rec.Code != 200 || rec.Body.String() != "BACKUP-BYTES" || rec.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("backup: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	// A failure before the first byte is a problem; after it, the
	// connection is aborted (no answer that looks whole).
	f.backup, f.backupErr = "", errors.New("snapshot failed")
	if rec := e.do(t, "POST", "/api/v1/backup", tokFull, ""); rec.Code != 500 {
		t.Fatalf("backup failing at once: %d %s", rec.Code, rec.Body)
	}
	f.backup = "HALF"
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("backup failing half-way: recovered %v, want http.ErrAbortHandler", v)
			}
		}()
		e.do(t, "POST", "/api/v1/backup", tokFull, "")
	}()

	rec = e.do(t, "POST", "/api/v1/restore?keep_credentials=true", tokFull, "QBK")
	var rs apitypes.RestoreStaged
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &rs) != nil || rs.ApplianceID != "old-01" || f.body != "QBK" || !f.keep || f.pass != "" {
		t.Fatalf("restore: %d %s (keep %v, passphrase %q)", rec.Code, rec.Body, f.keep, f.pass)
	}
	// The passphrase travels in its header, both ways.
	req := httptest.NewRequest("POST", "/api/v1/restore", strings.NewReader("QBK"))
	req.Header.Set("Authorization", "Bearer "+tokFull)
	req.Header.Set(apitypes.PassphraseHeader, "correct horse")
	r2 := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(r2, req)
	if r2.Code != 200 || f.pass != "correct horse" || f.keep {
		t.Fatalf("restore with a passphrase: %d (passphrase %q)", r2.Code, f.pass)
	}
	f.backup, f.backupErr = "B", nil
	req = httptest.NewRequest("POST", "/api/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+tokFull)
	req.Header.Set(apitypes.PassphraseHeader, "s3cret")
	r2 = httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(r2, req)
	if r2.Code != 200 || f.pass != "s3cret" {
		t.Fatalf("backup with a passphrase: %d (passphrase %q)", r2.Code, f.pass)
	}
}

func TestFirmwareRoutes_LogLevel(t *testing.T) {
	f := &fakeAppliance{level: "INFO"}
	e := applianceEnv(t, f)
	if rec := e.do(t, "GET", "/api/v1/log-level", tokFull, ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"level":"INFO"`) {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "PUT", "/api/v1/log-level", tokFull, `{"level":"debug"}`); rec.Code != 200 || f.level != "DEBUG" {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "PUT", "/api/v1/log-level", tokFull, `{"level":"loud"}`); rec.Code != 400 {
		t.Fatalf("PUT loud: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "PUT", "/api/v1/log-level", tokFull, `{"lvl":"debug"}`); rec.Code != 400 {
		t.Fatalf("an unknown key: %d %s", rec.Code, rec.Body)
	}
	if rec := newEnv(t, Config{}).do(t, "GET", "/api/v1/log-level", tokFull, ""); rec.Code != 501 {
		t.Fatalf("without an appliance: %d", rec.Code)
	}
}
