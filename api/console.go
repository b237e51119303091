package api

import (
	"net/http"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/api/console"
	"qubiq.dev/edge/auth"
)

// The engineer's web console (docs/console.md): its assets at /console/
// and what distinguishes its requests. The console is a front door made of
// the routes of the route table; it adds no way around them.

// ConsoleHeader marks a request of the engineer's console. A browser
// session sends it with every API request of the console; the server
// accepts it only from a platform-realm session (operators use LiveView),
// records the requests' origin as ConsoleOrigin instead of "liveview", and
// lets such a session run a script entry with its own args when it holds
// the designer permission (runFromConsole). It widens no grant: the
// session's grant is derived on the server as for every session.
const ConsoleHeader = "X-Qubiq-Console"

// ConsoleOrigin is the grant origin of a console session's requests, as
// the audit log records it.
const ConsoleOrigin = "console"

// ConsolePath is where the console is served.
const ConsolePath = "/console/"

// mountConsole serves the console's assets (public, like LiveView's: they
// hold no data; the data comes from the API with the session's grant).
func (s *Server) mountConsole() {
	s.mux.Handle("GET /console", http.RedirectHandler(ConsolePath, http.StatusMovedPermanently))
	s.mux.Handle("GET "+ConsolePath, http.StripPrefix("/console", console.Handler()))
}

// consoleSession reports whether r, a request of route rt, comes from the
// console (ConsoleHeader), refusing the header together with a LiveView
// panel, and from a session outside the platform realm on every route but
// the session's own (its info and logout, so the console can say why and
// sign out).
func consoleSession(r *http.Request, rt route, info auth.SessionInfo, panel string) (bool, error) {
	if r.Header.Get(ConsoleHeader) == "" {
		return false, nil
	}
	if panel != "" {
		return false, errorf(http.StatusBadRequest, KindInvalid, "a request comes from the console (%s) or from a LiveView panel (%s), not both",
			ConsoleHeader, PanelHeader)
	}
	if info.Realm != auth.RealmPlatform && rt.need.session {
		return false, nil
	}
	if info.Realm != auth.RealmPlatform {
		return false, errorf(http.StatusForbidden, KindPermissionDenied,
			"the console is for platform-realm users; %q is a user of the %s realm: use the LiveView panels", info.User, info.Realm)
	}
	return true, nil
}

// runFromConsole runs module.entry with the request's args for a console
// session: the console's Scripts page needs the designer permission (who
// may author a script may run it with any args), on top of the route's
// script:execute. The run is audited by the service with the session's
// grant (origin "console").
func (s *Server) runFromConsole(w http.ResponseWriter, r *http.Request, g auth.Grant, module, entry string) error {
	target := r.Method + " " + r.URL.Path + " (console)"
	for _, n := range []need{scope(auth.ScriptExecute), perm(auth.Designer)} {
		if err := s.requireNeed(r, route{need: n}, target, g); err != nil {
			return err
		}
	}
	var req apitypes.ScriptRunRequest
	if err := decodeBody(r, &req, decodeOpts{allowEmpty: true}); err != nil {
		return err
	}
	args := req.Args // absent: the service gives the entry {}
	run, err := s.deps.Scripts.RunScript(r.Context(), g, module, entry, args)
	if err != nil {
		return err
	}
	s.writeRun(w, r, run)
	return nil
}
