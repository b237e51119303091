package sandbox

import (
	"errors"
	"testing"

	"qubiq.dev/edge/auth"
)

// designScopes is the contract's table "Scope of each system.* method"
// (README: Scripting API and data; sandbox/METHODS.md), copied row by row.
var designScopes = map[string]auth.Scope{
	"tag.read":               auth.TagRead,
	"tag.browse":             auth.TagRead,
	"tag.write":              auth.TagWrite,
	"db.runNamedQuery":       auth.DBRead,
	"db.runQuery":            auth.DBWrite,
	"db.callProc":            auth.DBWrite,
	"db.beginTransaction":    auth.DBWrite,
	"db.commitTransaction":   auth.DBWrite,
	"db.rollbackTransaction": auth.DBWrite,
	"db.closeTransaction":    auth.DBWrite,
	"hist.getTrends":         auth.HistRead,
	"vars.get":               auth.VarsRead,
	"vars.keys":              auth.VarsRead,
	"vars.list":              auth.VarsRead,
	"vars.set":               auth.VarsWrite,
	"vars.delete":            auth.VarsWrite,
	"vars.incr":              auth.VarsWrite,
	"files.read":             auth.FileRead,
	"files.size":             auth.FileRead,
	"files.readChunk":        auth.FileRead,
	"files.save":             auth.FileWrite,
	"files.delete":           auth.FileWrite,
	"message.send":           auth.ScriptExecute,
	"script.runOnGateway":    auth.ScriptExecute,
	"alarm.queryStatus":      auth.AlarmRead,
	"alarm.queryJournal":     auth.AlarmRead,
	"alarm.acknowledge":      auth.AlarmAck,
	"alarm.shelve":           auth.AlarmAck,
	"alarm.unshelve":         auth.AlarmAck,
	"alarm.addNote":          auth.AlarmAck,
}

func TestScopeFor_EveryMethodOfDesignTable(t *testing.T) {
	for method, want := range designScopes {
		t.Run(method, func(t *testing.T) {
			got, err := ScopeFor(method)
			if err != nil || got != want {
				t.Errorf("ScopeFor(%q) = %q, %v; want %q", method, got, err, want)
			}
		})
	}
	// The table has no row that the contract's table lacks.
	for _, m := range Methods() {
		if _, ok := designScopes[m.Name]; !ok {
			t.Errorf("the method table has %q, which the contract's scope table does not", m.Name)
		}
	}
}

func TestScopeFor_UnknownMethod_NeedsStrongScope(t *testing.T) {
	tests := []struct {
		method string
		want   auth.Scope
	}{
		{"tag.delete", auth.TagWrite},
		{"tag.", auth.TagWrite},
		{"alarm.queryHistory", auth.AlarmAck}, // no row: the namespace's strong scope
		{"alarm.disable", auth.AlarmAck},
		{"db.dropTable", auth.DBWrite},
		{"hist.purge", auth.HistWrite},
		{"hist.storeDataPoints", auth.HistWrite},
		{"vars.clear", auth.VarsWrite},
		{"files.rename", auth.FileWrite},
		{"message.broadcast", auth.ScriptExecute},
		{"script.eval", auth.ScriptExecute},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			got, err := ScopeFor(tt.method)
			if err != nil || got != tt.want {
				t.Errorf("ScopeFor(%q) = %q, %v; want %q", tt.method, got, err, tt.want)
			}
		})
	}
}

func TestScopeFor_UnknownNamespace_Refused(t *testing.T) {
	for _, m := range []string{"os.system", "net.http", "", "tag", "Tag.read", "system.tag.read", "file.read"} {
		if s, err := ScopeFor(m); !errors.Is(err, ErrUnknownNamespace) {
			t.Errorf("ScopeFor(%q) = %q, %v; want ErrUnknownNamespace", m, s, err)
		}
	}
}
