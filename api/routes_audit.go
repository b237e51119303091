package api

import (
	"net/http"
	"strconv"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// auditRoutes list the audit log (the route table, testdata/routes.md: GET /audit needs
// users_admin). routes.go's table gets them through init.
var auditRoutes = []route{
	{method: "GET", path: prefix + "/audit", need: perm(auth.UsersAdmin), dep: depAudit, handle: (*Server).listAudit},
}

func init() { routes = append(routes, auditRoutes...) }

// listAudit answers GET /api/v1/audit?after=SEQ&limit=N&result=R: records
// after the sequence number SEQ (default 0), oldest first, at most N
// (default 100); result=, principal=, origin= and action= keep the
// matching ones (gateway.AuditQuery says how each matches: result
// exactly, "ok" or a failure's kind such as script_error).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	q := r.URL.Query()
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, "after=%q: want a sequence number", v)
		}
		after = n
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return errorf(http.StatusBadRequest, KindInvalid, "limit=%q: want 1 to 10000", v)
		}
		limit = n
	}
	aq := gateway.AuditQuery{Principal: q.Get("principal"), Origin: q.Get("origin"), Action: q.Get("action"), Result: q.Get("result")}
	recs, err := s.deps.Audit.AuditRecords(r.Context(), after, limit, aq)
	if err != nil {
		return err
	}
	out := make([]apitypes.AuditRecord, len(recs))
	for i, rec := range recs {
		out[i] = wireAudit(rec)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}
