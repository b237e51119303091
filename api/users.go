package api

import (
	"net/http"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, _ auth.Grant) error {
	us, err := s.deps.Users.ListUsers(r.Context())
	if err != nil {
		return err
	}
	out := make([]apitypes.UserInfo, len(us))
	for i, u := range us {
		out[i] = wireUser(u)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) addUser(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.UserRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Name == "" || req.Realm == "" || req.Password == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "name", "realm" or "password"`)
	}
	nu := gateway.NewUser{Name: req.Name, Realm: auth.Realm(req.Realm), Password: req.Password}
	for _, p := range req.Permissions {
		perm, err := auth.ParsePermission(p)
		if err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, "permissions: %v", err)
		}
		nu.Permissions = append(nu.Permissions, perm)
	}
	if err := covers(g, req.Realm, req.Level, req.Permissions); err != nil {
		return err
	}
	if req.Level != "" {
		nu.Level, _ = auth.ParseLevel(req.Level) // covers refused a bad level
	}
	if err := s.deps.Users.AddUser(r.Context(), g, nu); err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (s *Server) setPassword(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	var req apitypes.PasswordRequest
	if err := decodeBody(r, &req, decodeOpts{}); err != nil {
		return err
	}
	if req.Password == "" {
		return errorf(http.StatusBadRequest, KindInvalid, `missing "password"`)
	}
	if err := s.mayManage(r, g, r.PathValue("name")); err != nil {
		return err
	}
	if err := s.deps.Users.SetPassword(r.Context(), g, r.PathValue("name"), req.Password); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) disableUser(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := s.deps.Users.DisableUser(r.Context(), g, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// covers refuses (403, naming what is missing) a user whose LiveView grant
// (auth.LiveViewGrant: a platform user is unrestricted, an operator gets
// its level's scopes) would exceed the creating grant g: a users_admin may
// not mint a user who can do more than itself (nothing a request
// sends widens a grant).
func covers(g auth.Grant, realm, level string, perms []string) error {
	var l auth.Level
	if level != "" {
		var err error
		if l, err = auth.ParseLevel(level); err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, "level: %v", err)
		}
	}
	ps := make([]auth.Permission, len(perms))
	for i, p := range perms {
		ps[i] = auth.Permission(p)
	}
	return g.CoversUser(auth.Realm(realm), l, ps)
}

// mayManage refuses to change the password of a user who can do more than
// g (taking over that user's sessions would widen g).
func (s *Server) mayManage(r *http.Request, g auth.Grant, name string) error {
	users, err := s.deps.Users.ListUsers(r.Context())
	if err != nil {
		return err
	}
	for _, u := range users {
		if u.Name == name {
			return g.CoversUser(u.Realm, u.Level, u.Permissions)
		}
	}
	return nil // unknown: SetPassword answers not found
}
