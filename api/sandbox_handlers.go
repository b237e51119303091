package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// Handlers of the sandbox routes (routes_sandbox.go). The middleware has
// checked the sandbox_admin permission and the body limit.

// Problem kinds of the sandbox routes.
const (
	KindAcknowledgementRequired = "acknowledgement_required"
	KindInstallFailed           = "install_failed"
)

// uploadReadTimeout is the read deadline of a wheel upload: 256 MiB at
// about 0.5 MB/s, the slowest field link worth supporting.
const uploadReadTimeout = 10 * time.Minute

// sandboxAdmin returns the dependency, or the 501 every sandbox route
// answers without one.
func (s *Server) sandboxAdmin(r *http.Request) (gateway.Packages, error) {
	if s.deps.Sandbox == nil {
		return nil, errorf(http.StatusNotImplemented, KindNotImplemented,
			"%s %s is not available in this daemon (sandbox administration)", r.Method, r.URL.Path)
	}
	return s.deps.Sandbox, nil
}

// sandboxError maps the sandbox's own sentinels; everything else goes to
// writeError's classification.
func sandboxError(err error) error {
	var we *WideningError
	switch {
	case errors.As(err, &we):
		return err
	case errors.Is(err, ErrPackageConflict):
		return &httpError{status: http.StatusConflict, kind: KindConflict, detail: gateway.Message(err)}
	case errors.Is(err, ErrInstallFailed):
		return &httpError{status: http.StatusBadGateway, kind: KindInstallFailed, detail: gateway.Message(err)}
	}
	return err
}

// writeSandboxError answers err as a problem; a *WideningError as 409
// with the widenings.
func (s *Server) writeSandboxError(w http.ResponseWriter, r *http.Request, err error) {
	var we *WideningError
	if errors.As(err, &we) {
		p := apitypes.WideningProblem{
			Problem:   newProblem(http.StatusConflict, KindAcknowledgementRequired, we.Error()),
			Widenings: wireWidenings(we.Widenings),
		}
		if p.Widenings == nil {
			p.Widenings = []apitypes.PackageWidening{}
		}
		b, merr := json.Marshal(p)
		if merr != nil {
			s.writeError(w, r, r.Pattern, merr)
			return
		}
		w.Header().Set("Content-Type", apitypes.ProblemContentType)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusConflict)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return // the client went away
		}
		return
	}
	s.writeError(w, r, r.Pattern, sandboxError(err))
}

func (s *Server) sandboxConfig(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	sa, err := s.sandboxAdmin(r)
	if err != nil {
		return err
	}
	cfg, err := sa.SandboxConfig(r.Context())
	if err != nil {
		return sandboxError(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, cfg)
	return nil
}

func (s *Server) listPackages(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	sa, err := s.sandboxAdmin(r)
	if err != nil {
		return err
	}
	pkgs, err := sa.ListPackages(r.Context())
	if err != nil {
		return sandboxError(err)
	}
	list := wirePackages(pkgs)
	for i := range list {
		list[i].Imports = nonNil(list[i].Imports)
		list[i].Widens = nonNil(list[i].Widens)
	}
	s.writeJSON(w, r, http.StatusOK, list)
	return nil
}

func (s *Server) checkIndex(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	sa, err := s.sandboxAdmin(r)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, wireIndexCheck(sa.CheckIndex(r.Context())))
	return nil
}

// packageStream writes an install's NDJSON answer: the 200 header goes out
// with the first progress event, so an install refused before it starts
// (bad requirement, busy, not acknowledged) is still an ordinary problem.
type packageStream struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	started bool
	broken  bool // the client went away: later events are dropped
}

func newPackageStream(s *Server, w http.ResponseWriter, r *http.Request) *packageStream {
	return &packageStream{s: s, w: w, r: r, rc: http.NewResponseController(w)}
}

func (ps *packageStream) send(ev apitypes.PackageEvent) {
	if ps.broken {
		return
	}
	if !ps.started {
		ps.started = true
		h := ps.w.Header()
		h.Set("Content-Type", apitypes.NDJSONContentType)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		ps.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(apitypes.PackageEvent{Event: apitypes.PackageEventProgress, Message: "unencodable event"})
	}
	if _, err := ps.w.Write(append(b, '\n')); err != nil {
		ps.broken = true
		return
	}
	if err := ps.rc.Flush(); err != nil {
		ps.broken = true
	}
}

func (ps *packageStream) progress(p gateway.PackageProgress) {
	ps.send(apitypes.PackageEvent{Event: apitypes.PackageEventProgress, Step: p.Step, Message: p.Message})
}

// finish ends the answer: the result, or the error as a problem (a final
// "error" event once the stream has started).
func (ps *packageStream) finish(gch gateway.PackageChange, err error) {
	ch := wireChange(gch)
	if err == nil {
		ch.Packages = nonNil(ch.Packages)
		ch.Installed = nonNil(ch.Installed)
		ch.Allowed = nonNil(ch.Allowed)
		ps.send(apitypes.PackageEvent{Event: apitypes.PackageEventDone, Result: &ch})
		return
	}
	if !ps.started {
		ps.s.writeSandboxError(ps.w, ps.r, err)
		return
	}
	var we *WideningError
	if errors.As(err, &we) {
		p := newProblem(http.StatusConflict, KindAcknowledgementRequired, we.Error())
		ps.send(apitypes.PackageEvent{Event: apitypes.PackageEventError, Error: &p})
		return
	}
	p, _, internal := classify(sandboxError(err))
	if internal {
		ps.s.log.ErrorContext(ps.r.Context(), "package install failed", "route", ps.r.Pattern, "error", err)
	}
	ps.send(apitypes.PackageEvent{Event: apitypes.PackageEventError, Error: &p})
}

func (s *Server) installPackage(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	sa, err := s.sandboxAdmin(r)
	if err != nil {
		return err
	}
	var req apitypes.PackageInstallRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Requirement == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "requirement" (a package name with an optional version: name==1.2)`)
	}
	ps := newPackageStream(s, w, r)
	progress := ps.progress
	if !req.AcknowledgeWidening {
		progress = nil // the answer is a 409 naming what the package widens
	}
	ch, err := sa.InstallPackage(r.Context(), g, gateway.PackageInstall{Requirement: req.Requirement,
		AcknowledgeWidening: req.AcknowledgeWidening}, progress)
	ps.finish(ch, err)
	return nil
}

// wheelName is what a raw upload's filename parameter must look like.
var wheelName = regexp.MustCompile(`^[A-Za-z0-9_.!+-]+\.whl$`)

// uploadPackages takes wheel files as multipart/form-data (every file part
// is a wheel; a field acknowledge_widening=true may stand among them) or
// as a raw body with ?filename=NAME.whl; acknowledge_widening=true may
// also be a query parameter.
func (s *Server) uploadPackages(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	sa, err := s.sandboxAdmin(r)
	if err != nil {
		return err
	}
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadReadTimeout)); err != nil {
		s.log.WarnContext(r.Context(), "cannot extend read deadline", "route", r.Pattern, "error", err)
	}
	ack, err := parseBool(r.URL.Query().Get("acknowledge_widening"))
	if err != nil {
		return err
	}
	var files WheelFiles
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		if params["boundary"] == "" {
			return errorf(http.StatusBadRequest, KindInvalid, "multipart body without a boundary")
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		n := 0
		files = func() (string, io.Reader, error) {
			for {
				part, err := mr.NextPart()
				if errors.Is(err, io.EOF) {
					if n == 0 {
						return "", nil, fmt.Errorf("%w: the upload holds no wheel file", ErrInvalid)
					}
					return "", nil, io.EOF
				}
				if err != nil {
					return "", nil, uploadReadError(err)
				}
				if part.FileName() == "" {
					if part.FormName() == "acknowledge_widening" {
						b, err := io.ReadAll(io.LimitReader(part, 16))
						if err != nil {
							return "", nil, uploadReadError(err)
						}
						v, perr := parseBool(string(b))
						if perr != nil {
							return "", nil, fmt.Errorf("%w: acknowledge_widening %q: want true or false", ErrInvalid, b)
						}
						ack = ack || v
					}
					continue
				}
				n++
				return part.FileName(), part, nil
			}
		}
	} else {
		name := r.URL.Query().Get("filename")
		if !wheelName.MatchString(name) {
			return errorf(http.StatusBadRequest, KindInvalid,
				"a raw upload needs ?filename=NAME.whl (the wheel's file name), or send multipart/form-data")
		}
		done := false
		files = func() (string, io.Reader, error) {
			if done {
				return "", nil, io.EOF
			}
			done = true
			return name, r.Body, nil
		}
	}
	ps := newPackageStream(s, w, r)
	// A form field may set ack while the parts are read: the service asks
	// for it after the last file.
	ch, err := sa.UploadPackages(r.Context(), g, files, func() bool { return ack }, ps.progress)
	ps.finish(ch, err)
	return nil
}

// uploadReadError keeps a too-large body a 413 and makes anything else a
// 400.
func uploadReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return fmt.Errorf("%w: reading the upload: %v", ErrInvalid, err)
}

func parseBool(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, KindInvalid, "acknowledge_widening %q: want true or false", v)
	}
	return b, nil
}

func (s *Server) removePackage(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	sa, err := s.sandboxAdmin(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if name == "" || len(name) > 200 {
		return errorf(http.StatusBadRequest, KindInvalid, "package name %q", name)
	}
	gch, err := sa.RemovePackage(r.Context(), g, name)
	if err != nil {
		s.writeSandboxError(w, r, err)
		return nil
	}
	ch := wireChange(gch)
	ch.Packages = nonNil(ch.Packages)
	ch.Installed = nonNil(ch.Installed)
	ch.Allowed = nonNil(ch.Allowed)
	s.writeJSON(w, r, http.StatusOK, ch)
	return nil
}
