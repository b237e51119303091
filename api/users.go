package api

import (
	"fmt"
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
	if req.Level != "" {
		l, err := auth.ParseLevel(req.Level)
		if err != nil {
			return errorf(http.StatusBadRequest, KindInvalid, "level: %v", err)
		}
		nu.Level = l
	}
	// The service checks the user, then whether g covers it
	// (auth.Grant.CoversUser): the rule has one home.
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
	if err := s.deps.Users.SetPassword(r.Context(), g, r.PathValue("name"), req.Password); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) disableUser(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	name := r.PathValue("name")
	already, err := s.deps.Users.DisableUser(r.Context(), g, name)
	if err != nil {
		return err
	}
	if !already {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	s.writeJSON(w, r, http.StatusOK, apitypes.Done{Already: true, Detail: fmt.Sprintf("user %q was already disabled; nothing changed", name)})
	return nil
}
