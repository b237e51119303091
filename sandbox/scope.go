package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"qubiq.dev/edge/auth"
)

// methodScopes is the scope of each system.* method: the one table of
// DESIGN.md, "Levels, realms, scopes, grants". tag.write also needs each
// tag's write level, which the Services check per tag.
var methodScopes = map[string]auth.Scope{
	"tag.read":   auth.TagRead,
	"tag.browse": auth.TagRead,
	"tag.write":  auth.TagWrite,

	"db.runNamedQuery":       auth.DBRead,
	"db.runQuery":            auth.DBWrite,
	"db.callProc":            auth.DBWrite,
	"db.beginTransaction":    auth.DBWrite,
	"db.commitTransaction":   auth.DBWrite,
	"db.rollbackTransaction": auth.DBWrite,
	"db.closeTransaction":    auth.DBWrite,

	"hist.getTrends": auth.HistRead,

	"vars.get":    auth.VarsRead,
	"vars.keys":   auth.VarsRead,
	"vars.list":   auth.VarsRead,
	"vars.set":    auth.VarsWrite,
	"vars.delete": auth.VarsWrite,
	"vars.incr":   auth.VarsWrite,

	"files.read":      auth.FileRead,
	"files.size":      auth.FileRead,
	"files.readChunk": auth.FileRead,
	"files.save":      auth.FileWrite,
	"files.delete":    auth.FileWrite,

	"message.send":        auth.ScriptExecute,
	"script.runOnGateway": auth.ScriptExecute,
}

// namespaceScopes is the strong scope of each namespace: the fail-safe of
// DESIGN.md for a method that has no row in methodScopes.
var namespaceScopes = map[string]auth.Scope{
	"tag":     auth.TagWrite,
	"db":      auth.DBWrite,
	"hist":    auth.HistWrite,
	"vars":    auth.VarsWrite,
	"files":   auth.FileWrite,
	"message": auth.ScriptExecute,
	"script":  auth.ScriptExecute,
}

// ErrUnknownNamespace is returned (wrapped) by ScopeFor for a method outside
// the system.* namespaces; such a call is refused.
var ErrUnknownNamespace = errors.New("unknown system namespace")

// ScopeFor returns the scope a grant needs to call the system.* method
// ("tag.read", without the "system." prefix): its row of DESIGN.md's table,
// or, for a method with no row, its namespace's strong scope (tag:write,
// db:write, hist:write, vars:write, file:write, script:execute). A method in
// no known namespace, or without a namespace, is an error wrapping
// ErrUnknownNamespace.
func ScopeFor(method string) (auth.Scope, error) {
	if s, ok := methodScopes[method]; ok {
		return s, nil
	}
	ns, _, dotted := strings.Cut(method, ".")
	if s, ok := namespaceScopes[ns]; ok && dotted {
		return s, nil
	}
	return "", fmt.Errorf("system.%s: %w", method, ErrUnknownNamespace)
}
