package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox/packages"
)

func TestPackageError_Mapping(t *testing.T) {
	tests := []struct {
		name string
		in   error
		want error
	}{
		{"bad requirement", fmt.Errorf("x: %w", packages.ErrBadRequirement), gateway.ErrInvalid},
		{"bad wheel", fmt.Errorf("x: %w", packages.ErrBadWheel), gateway.ErrInvalid},
		{"not installed", fmt.Errorf("x: %w", packages.ErrNotInstalled), gateway.ErrNotFound},
		{"busy", packages.ErrPackagesBusy, gateway.ErrConflict},
		{"dependency", fmt.Errorf("x: %w", packages.ErrIsDependency), gateway.ErrConflict},
		{"offline", fmt.Errorf("x: %w", packages.ErrOffline), gateway.ErrConflict},
		{"pip", fmt.Errorf("x: %w", packages.ErrPip), gateway.ErrInstallFailed},
		{"no pip", fmt.Errorf("x: %w", packages.ErrNoPip), gateway.ErrInstallFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := packageError(tt.in); !errors.Is(got, tt.want) {
				t.Errorf("packageError(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	var we *gateway.WideningError
	got := packageError(&packages.WideningError{Widenings: []packages.Widening{{Package: "numpy", Requested: true, Widens: []string{"ctypes"}}}})
	if !errors.As(got, &we) || len(we.Widenings) != 1 || we.Widenings[0].Package != "numpy" || we.Widenings[0].Widens[0] != "ctypes" {
		t.Errorf("widening: %v", got)
	}
	var se *gateway.ScriptError
	if got := packageError(fmt.Errorf("%w: no runtime", packages.ErrNoRuntime)); !errors.As(got, &se) || se.Kind != "runtime_missing" {
		t.Errorf("runtime missing: %v", got)
	}
}

type auditCall struct{ principal, action, target string }

// Every install and removal through the service is audited with who made
// it; a refused (unacknowledged) install is not a change and is not.
func TestSandboxAdmin_AuditsInstallAndRemove(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "setup.py"), []byte("from setuptools import setup\nsetup(name=\"qubiq-dpkg\", version=\"1.0\", py_modules=[\"qdpkg\"])\n"), 0o644)
	os.WriteFile(filepath.Join(src, "qdpkg.py"), []byte("X = 1\n"), 0o644)
	out := t.TempDir()
	cmd := exec.Command("/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", out, src)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + src, "PIP_CONFIG_FILE=/dev/null"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip wheel: %v: %s", err, b)
	}
	whl, _ := filepath.Glob(filepath.Join(out, "*.whl"))
	if len(whl) != 1 {
		t.Fatalf("wheels %v", whl)
	}
	dir := t.TempDir()
	s := newService(t, testOptions(t, dir))
	var sandboxStep Step
	for _, st := range s.Steps() {
		if st.Name == "sandbox" {
			sandboxStep = st
		}
	}
	if err := sandboxStep.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sandboxStep.Stop(context.Background())
	a := s
	files := func() gateway.WheelFiles {
		done := false
		return func() (string, io.Reader, error) {
			if done {
				return "", nil, io.EOF
			}
			done = true
			f, err := os.Open(whl[0])
			if err != nil {
				return "", nil, err
			}
			t.Cleanup(func() { f.Close() })
			return filepath.Base(whl[0]), f, nil
		}
	}
	tech := auth.Grant{Principal: "tech", Realm: auth.RealmPlatform, Permissions: []auth.Permission{auth.SandboxAdmin}}
	var we *gateway.WideningError
	if _, err := a.UploadPackages(context.Background(), tech, files(), func() bool { return false }, nil); !errors.As(err, &we) {
		t.Fatalf("unacknowledged upload: %v", err)
	}
	var steps []string
	ch, err := a.UploadPackages(context.Background(), tech, files(), func() bool { return true },
		func(e gateway.PackageProgress) { steps = append(steps, e.Step) })
	if err != nil || len(ch.Installed) != 1 || ch.Installed[0].Imports[0] != "qdpkg" || len(steps) == 0 {
		t.Fatalf("upload: %+v %v (steps %v)", ch, err, steps)
	}
	if _, err := a.RemovePackage(context.Background(), tech, "qubiq-dpkg"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RemovePackage(context.Background(), tech, "qubiq-dpkg"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("second removal: %v", err)
	}
	var audited []auditCall
	for _, r := range auditRecords(t, s) {
		if strings.HasPrefix(r.Action, "sandbox.package.") {
			audited = append(audited, auditCall{r.Principal, r.Action, r.Target})
		}
	}
	if len(audited) != 2 || audited[0].principal != "tech" || audited[0].action != "sandbox.package.upload" ||
		!strings.Contains(audited[0].target, "qubiq_dpkg-1.0") || audited[1] != (auditCall{"tech", "sandbox.package.remove", "qubiq-dpkg"}) {
		t.Errorf("audit %+v", audited)
	}
}
