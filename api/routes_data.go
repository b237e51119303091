package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// dataRoutes are the routes of the system.* data services (issue 4;
// the route table, testdata/routes.md). routes.go splices them into the route table.
// PUT /files takes bodies up to fileBodyLimit; the daemon's files limit
// (Data.MaxFileBytes) then applies.
var dataRoutes = []route{
	{method: "POST", path: prefix + "/db/named/{name}", need: scope(auth.DBRead), dep: depData, handle: (*Server).runNamedQuery},
	{method: "GET", path: prefix + "/history", need: scope(auth.HistRead), dep: depData, handle: (*Server).history},
	{method: "GET", path: prefix + "/vars/{key}", need: scope(auth.VarsRead), dep: depData, handle: (*Server).getVar},
	{method: "PUT", path: prefix + "/vars/{key}", need: scope(auth.VarsWrite), dep: depData, handle: (*Server).setVar},
	{method: "DELETE", path: prefix + "/vars/{key}", need: scope(auth.VarsWrite), dep: depData, handle: (*Server).deleteVar},
	{method: "POST", path: prefix + "/vars/{key}/incr", need: scope(auth.VarsWrite), dep: depData, handle: (*Server).incrVar},
	{method: "GET", path: prefix + "/files/{path...}", need: scope(auth.FileRead), dep: depData, handle: (*Server).getFile},
	{method: "PUT", path: prefix + "/files/{path...}", need: scope(auth.FileWrite), dep: depData, bodyLimit: fileBodyLimit,
		longWrite: true, handle: (*Server).putFile},
	{method: "DELETE", path: prefix + "/files/{path...}", need: scope(auth.FileWrite), dep: depData, handle: (*Server).deleteFile},
	{method: "POST", path: prefix + "/messages/{handler}", need: scope(auth.ScriptExecute), dep: depData, longWrite: true,
		handle: (*Server).sendMessage},
}

// fileBodyLimit caps PUT /files bodies: 64 MiB, the default files limit.
const fileBodyLimit = 64 << 20

func (s *Server) runNamedQuery(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.NamedQueryRequest
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	rows, err := s.deps.Data.RunNamedQuery(r.Context(), g, gateway.NamedQuery{Name: r.PathValue("name"), Params: req.Params,
		Database: req.Database, Encoding: gateway.RowsPlain})
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.NamedQueryResult{Rows: rows})
	return nil
}

// parseTimeParam parses an RFC 3339 query parameter (a zone required).
func parseTimeParam(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errorf(http.StatusBadRequest, KindInvalid, "%s %q is not RFC 3339 with a zone (2025-03-01T12:00:00Z)", name, v)
	}
	return t, nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	qv := r.URL.Query()
	for k := range qv {
		switch k {
		case "path", "start", "end", "interval_ms", "aggregate":
		default:
			return errorf(http.StatusBadRequest, KindInvalid, "unknown query parameter %q (want path, start, end, interval_ms, aggregate)", k)
		}
	}
	q := gateway.HistoryQuery{Paths: qv["path"], Aggregate: qv.Get("aggregate")}
	if len(q.Paths) == 0 {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "path" (repeat it for several tags)`)
	}
	if qv.Get("start") == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "start" (RFC 3339)`)
	}
	var err error
	if q.Start, err = parseTimeParam("start", qv.Get("start")); err != nil {
		return err
	}
	if e := qv.Get("end"); e != "" {
		if q.End, err = parseTimeParam("end", e); err != nil {
			return err
		}
	}
	if iv := qv.Get("interval_ms"); iv != "" {
		ms, err := strconv.ParseInt(iv, 10, 64)
		if err != nil || ms <= 0 {
			return errorf(http.StatusBadRequest, KindInvalid, "interval_ms %q: want a positive integer", iv)
		}
		q.Interval = time.Duration(ms) * time.Millisecond
	}
	series, err := s.deps.Data.History(r.Context(), g, q)
	if err != nil {
		return err
	}
	out := make([]apitypes.HistorySeries, len(series))
	for i, hs := range series {
		out[i] = wireSeries(hs)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) getVar(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	key := r.PathValue("key")
	v, err := s.deps.Data.GetVar(r.Context(), g, key)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.VarValue{Key: key, Value: v})
	return nil
}

func (s *Server) setVar(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	key := r.PathValue("key")
	var req apitypes.VarPut
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Value == nil {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "value" (any JSON value)`)
	}
	if err := s.deps.Data.SetVar(r.Context(), g, key, req.Value); err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.VarValue{Key: key, Value: req.Value})
	return nil
}

func (s *Server) deleteVar(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.deps.Data.DeleteVar(r.Context(), g, r.PathValue("key")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) incrVar(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	key := r.PathValue("key")
	var req apitypes.VarIncr
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	if req.By == "" {
		req.By = "1"
	}
	v, err := s.deps.Data.IncrVar(r.Context(), g, key, req.By)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.VarValue{Key: key, Value: v})
	return nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	qv := r.URL.Query()
	off, length := int64(0), int64(-1)
	for k := range qv {
		if k != "offset" && k != "length" {
			return errorf(http.StatusBadRequest, KindInvalid, "unknown query parameter %q (want offset, length)", k)
		}
	}
	if v := qv.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, KindInvalid, "offset %q: want an integer >= 0", v)
		}
		off = n
	}
	if v := qv.Get("length"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, KindInvalid, "length %q: want an integer >= 0", v)
		}
		length = n
	} else if off != 0 {
		return errorf(http.StatusBadRequest, KindInvalid, "offset needs length")
	}
	b, err := s.deps.Data.ReadFile(r.Context(), g, r.PathValue("path"), off, length)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(b); err != nil {
		s.log.DebugContext(r.Context(), "answer not delivered", "route", r.Pattern, "error", err)
	}
	return nil
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	limit := s.deps.Data.MaxFileBytes()
	if r.ContentLength > limit {
		return &http.MaxBytesError{Limit: limit}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	path := r.PathValue("path")
	if err := s.deps.Data.SaveFile(r.Context(), g, path, b); err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.FileSaved{Path: path, Size: int64(len(b))})
	return nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.deps.Data.DeleteFile(r.Context(), g, r.PathValue("path")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.MessageRequest
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	payload := req.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	run, err := s.deps.Data.SendMessage(r.Context(), g, r.PathValue("handler"), payload)
	if err != nil {
		return err
	}
	s.writeRun(w, r, run)
	return nil
}
