package service

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// TestStart_PushedScriptSurvivesRestart: a project script file is loaded
// at start only when it changed since it was last loaded: a version pushed
// since runs after a restart, and editing the file makes the file's code
// the next version (docs/scripting.md, "Modules, versions and entries").
func TestStart_PushedScriptSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.py")
	writeCode := func(result string) {
		if err := os.WriteFile(file, []byte("def f(args):\n    return "+result+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeCode(`"file 1"`)
	opts := withProjectFile(t, testOptions(t, dir), dir, "scripts:\n  - {module: m, file: m.py}\n")
	des := auth.Grant{Principal: "des", Realm: auth.RealmPlatform, Origin: "rest",
		Scopes: []auth.Scope{auth.ScriptExecute}, WriteLevel: auth.LevelDesign, Permissions: []auth.Permission{auth.Designer}}
	// start runs one daemon life: the sandbox step up and warmed, fn, down.
	start := func(fn func(s *Service)) {
		t.Helper()
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, st := range s.Steps() {
			if st.Name == "sandbox" {
				if err := st.Start(ctx); err != nil {
					t.Fatal(err)
				}
				<-s.Warmed()
				fn(s)
				st.Stop(ctx)
			}
		}
		s.Close(ctx)
	}
	run := func(s *Service, want string) {
		t.Helper()
		r, err := s.RunScript(context.Background(), des, "m", "f", json.RawMessage(`{}`))
		if err != nil || string(r.Result) != want {
			t.Fatalf("run: %s %v, want %s", r.Result, err, want)
		}
	}
	start(func(s *Service) {
		run(s, `"file 1"`)
		if _, err := s.SaveScript(context.Background(), des, gateway.ScriptSource{Module: "m", Code: "def f(args):\n    return \"pushed\"\n"}); err != nil {
			t.Fatal(err)
		}
		run(s, `"pushed"`)
	})
	start(func(s *Service) { run(s, `"pushed"`) }) // the file is unchanged: the push stays
	writeCode(`"file 2"`)
	start(func(s *Service) { run(s, `"file 2"`) }) // the file was edited: it is the next version
	start(func(s *Service) {
		run(s, `"file 2"`)
		vs, err := s.ScriptVersions(context.Background(), des, "m")
		if err != nil || len(vs) != 3 {
			t.Errorf("versions %+v %v, want 3 (file 1, pushed, file 2)", vs, err)
		}
	})
}
