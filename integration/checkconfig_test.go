//go:build integration

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfig_EveryErrorInOneRun: --check-config names every problem of
// a broken project in one run, each with its file and line, and exits 1; a
// good one exits 0 (README.md, Binaries).
func TestCheckConfig_EveryErrorInOneRun(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "scripts"), 0o755)
	os.WriteFile(filepath.Join(dir, "scripts", "pumps.py"), []byte("def start(args):\n    return 1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte("data_dir: data\nproject: project.yaml\n"), 0o644)
	project := `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Speed, device: sim, address: "ramp(0,1500,60s)", type: float64, scna: 1s}
  - {path: Line1/Level, device: sim, address: "randm(0,1)", type: float64}
  - {path: Line1/Run, device: sim, address: memory, type: boolean}
  - {path: Line1/Max, device: simm, address: memory, type: int32}
  - {path: Line1/Level, device: sim, address: memory, type: int16}
scripts:
  - {module: pumps, file: scripts/pumps.py, liveview: [start, stopp]}
  - {module: other, file: scripts/missing.py}
`
	os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project), 0o644)
	cmd := exec.Command(filepath.Join(bins(t), "qubiqd"), "--check-config", "--config", filepath.Join(dir, "qubiq.yaml"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1:\n%s", err, out)
	}
	for _, want := range []string{
		`project.yaml:4: unknown key "scna" in a tag`,
		`project.yaml:5: tag "Line1/Level"`, `"randm"`,
		`project.yaml:6: tag "Line1/Run"`, `unknown type "boolean"`,
		`project.yaml:7: tag "Line1/Max": unknown device "simm"`,
		`project.yaml:8: tag "Line1/Level": defined twice (first at line 5)`,
		`liveview entry "stopp" is not a top-level function`,
		`script "other"`, `missing.py`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--check-config output lacks %q:\n%s", want, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "project.yaml"), []byte("devices: [{name: sim, driver: sim}]\ntags:\n  - {path: A, device: sim, address: memory, type: int16}\n"), 0o644)
	if out, err := exec.Command(filepath.Join(bins(t), "qubiqd"), "--check-config", "--config", filepath.Join(dir, "qubiq.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("good config refused: %v\n%s", err, out)
	}
}
