package api

import (
	"errors"
	"net/http"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// applianceRoutes are the appliance's own routes (docs/appliance.md; the
// route table, testdata/routes.md: "POST /backup, POST /restore, POST
// /firmware | firmware", and the rows issue 14 added). Each translates to
// one gateway.Appliance call; they answer 501 without Deps.Appliance. The
// uploads and the backup stream lift the server's read and write
// deadlines (stream): a bundle or a backup may take minutes on a slow
// link; their size is bounded by the route's limit and, below it, by the
// daemon config (firmware.max_size, firmware.max_backup).
var applianceRoutes = []route{
	{method: "POST", path: prefix + "/firmware", need: perm(auth.Firmware), stream: true, bodyLimit: MaxFirmwareUpload, handle: (*Server).flash},
	{method: "GET", path: prefix + "/firmware", need: perm(auth.Firmware), handle: (*Server).firmwareStatus},
	{method: "POST", path: prefix + "/backup", need: perm(auth.Firmware), stream: true, handle: (*Server).backup},
	{method: "POST", path: prefix + "/restore", need: perm(auth.Firmware), stream: true, bodyLimit: MaxRestoreUpload, handle: (*Server).restore},
	{method: "GET", path: prefix + "/log-level", need: perm(auth.Firmware), handle: (*Server).logLevel},
	{method: "PUT", path: prefix + "/log-level", need: perm(auth.Firmware), handle: (*Server).setLogLevel},
}

func init() { routes = append(routes, applianceRoutes...) }

// Body limits of the upload routes (bytes): the route's ceiling; the daemon
// config's firmware.max_size (default 1 GiB) and firmware.max_backup
// (default 64 GiB) apply below them.
const (
	MaxFirmwareUpload int64 = 4 << 30
	MaxRestoreUpload  int64 = 256 << 30
)

// refusalStatus is the status of a refused upload, by the rule it broke
// (gateway.Refusal's kind): the bundle's fault is 422, a conflict with the
// appliance's state 409, too large 413.
var refusalStatus = map[string]int{
	"unknown_key": http.StatusUnprocessableEntity, "signature": http.StatusUnprocessableEntity,
	"hash": http.StatusUnprocessableEntity, "format": http.StatusUnprocessableEntity,
	"arch": http.StatusConflict, "downgrade": http.StatusConflict, "upgrade_path": http.StatusConflict,
	"busy": http.StatusConflict, "no_slots": http.StatusConflict, "too_large": http.StatusRequestEntityTooLarge,
	"passphrase": http.StatusUnprocessableEntity,
}

// passphrase is the request's apitypes.PassphraseHeader.
func passphrase(r *http.Request) []byte {
	if v := r.Header.Get(apitypes.PassphraseHeader); v != "" {
		return []byte(v)
	}
	return nil
}

func (s *Server) applianceDep(r *http.Request) (gateway.Appliance, error) {
	if s.deps.Appliance == nil {
		return nil, errorf(http.StatusNotImplemented, KindNotImplemented,
			"%s %s is not available in this daemon (appliance)", r.Method, r.URL.Path)
	}
	return s.deps.Appliance, nil
}

func wireRefusal(err error) error {
	var rf *gateway.Refusal
	if errors.As(err, &rf) {
		st, ok := refusalStatus[rf.Kind]
		if !ok {
			st = http.StatusUnprocessableEntity
		}
		return errorf(st, rf.Kind, "%s", rf.Err.Error())
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return mb
	}
	return err
}

func (s *Server) flash(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	ap, err := s.applianceDep(r)
	if err != nil {
		return err
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	res, err := ap.Flash(r.Context(), g, r.Body, force)
	if err != nil {
		return wireRefusal(err)
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.FlashResult{Version: res.Version, Arch: res.Arch, Key: res.Key, Slot: res.Slot,
		Size: res.Size, SHA256: res.SHA256, Forced: res.Forced, Previous: res.Previous, RestartRequired: res.RestartRequired})
	return nil
}

func wireFirmware(st gateway.FirmwareStatus, history bool) apitypes.FirmwareStatus {
	out := apitypes.FirmwareStatus{Running: st.Running, Active: st.Active, Current: st.Current, Trial: st.Trial, BootCount: st.BootCount,
		BootLimit: st.BootLimit, Slots: map[string]apitypes.SlotStatus{}}
	for k, v := range st.Slots {
		out.Slots[k] = apitypes.SlotStatus{Version: v.Version, Arch: v.Arch, SchemaVersion: v.SchemaVersion, InstalledAt: v.InstalledAt, Bad: v.Bad}
	}
	res := func(r gateway.SlotResult) apitypes.SlotResult {
		return apitypes.SlotResult{Time: r.Time, Action: r.Action, Slot: r.Slot, Version: r.Version, OK: r.OK, Message: r.Message}
	}
	if st.Last != nil {
		l := res(*st.Last)
		out.Last = &l
	}
	if history {
		for _, h := range st.History {
			out.History = append(out.History, res(h))
		}
	}
	if st.Upload != nil {
		out.Upload = &apitypes.UploadProgress{Received: st.Upload.Received, Started: st.Upload.Started}
	}
	return out
}

// healthFirmware is the "firmware" member of GET /health: the slots
// without their history, or nil without Deps.Appliance, a readable state,
// or a slot the daemon runs from (a development build).
func (s *Server) healthFirmware(r *http.Request) *apitypes.FirmwareStatus {
	if s.deps.Appliance == nil {
		return nil
	}
	st, err := s.deps.Appliance.FirmwareStatus(r.Context())
	if err != nil || st.Running == "" {
		return nil
	}
	out := wireFirmware(st, false)
	return &out
}

func (s *Server) firmwareStatus(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	ap, err := s.applianceDep(r)
	if err != nil {
		return err
	}
	st, err := ap.FirmwareStatus(r.Context())
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, wireFirmware(st, true))
	return nil
}

// backup streams the backup as the answer. A failure after the first byte
// aborts the connection, so the client sees a truncated transfer rather
// than a file that looks whole.
func (s *Server) backup(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	ap, err := s.applianceDep(r)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="qubiq-backup.qbk"`)
	w.Header().Set("Cache-Control", "no-store")
	ww := &wroteWriter{w: w}
	if err := ap.Backup(r.Context(), g, ww, gateway.BackupRequest{Passphrase: passphrase(r)}); err != nil {
		if !ww.wrote {
			return err
		}
		s.log.ErrorContext(r.Context(), "backup failed after the first byte; connection aborted", "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

type wroteWriter struct {
	w     http.ResponseWriter
	wrote bool
}

// Write passes p on; an empty p is not passed (it would send the 200
// header before the backup has produced a byte).
func (w *wroteWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	w.wrote = true
	return w.w.Write(p)
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	ap, err := s.applianceDep(r)
	if err != nil {
		return err
	}
	keep, err := boolParam(r, "keep_credentials")
	if err != nil {
		return err
	}
	res, err := ap.StageRestore(r.Context(), g, r.Body, gateway.RestoreRequest{KeepCredentials: keep, Passphrase: passphrase(r)})
	if err != nil {
		return wireRefusal(err)
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.RestoreStaged{ApplianceID: res.ApplianceID, Version: res.Version, Created: res.Created,
		Entries: res.Entries, RestartRequired: res.RestartRequired})
	return nil
}

func (s *Server) logLevel(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	ap, err := s.applianceDep(r)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.LogLevel{Level: ap.LogLevel()})
	return nil
}

func (s *Server) setLogLevel(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	ap, err := s.applianceDep(r)
	if err != nil {
		return err
	}
	var req apitypes.LogLevel
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	l, err := ap.SetLogLevel(r.Context(), g, req.Level)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.LogLevel{Level: l})
	return nil
}
