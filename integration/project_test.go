//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// ctl runs qubiqctl against d with token and returns its exit code,
// stdout and stderr.
func (d *daemon) ctl(token string, args ...string) (int, string, string) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(bins(d.t), "qubiqctl"), append([]string{"--url", d.url, "--api-key", token}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	d.t.Fatalf("qubiqctl %v: %v", args, err)
	return -1, "", ""
}

const importProject = `# plant project, imported by hand
devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Ramp, device: sim, address: "ramp(0,1000,10s)", type: float64, scan: 100ms}
  - {path: Line1/Set, device: sim, address: memory, type: float64, scan: 100ms}
`

// TestProject_TagsAndProjectImport_WithoutRestart drives issue 5's tag
// import and the project import through qubiqctl against the simulator:
// a CSV with one bad row is refused whole, naming the line; the fixed file
// brings tags that read Good without restarting qubiqd; exports round-trip;
// an edited project export imports; a restart keeps the imported project.
func TestProject_TagsAndProjectImport_WithoutRestart(t *testing.T) {
	d := newDaemon(t, importProject)
	d.start()
	designer := d.apiKey("designer", []string{"tag:read", "tag:write"}, "design", "designer")
	dir := t.TempDir()
	goodValues := func(paths ...string) {
		t.Helper()
		waitFor(t, 10*time.Second, "tags Good: "+strings.Join(paths, ", "), func() (bool, string) {
			got := d.read(designer, paths...)
			for _, p := range paths {
				if got[p].Quality != "Good" {
					return false, p + " " + got[p].Quality + " " + got[p].Reason
				}
			}
			return true, ""
		})
	}
	goodValues("Line1/Ramp", "Line1/Set")
	if code, _, errOut := d.ctl(designer, "tags", "write", "Line1/Set=42.5"); code != 0 {
		t.Fatalf("tags write: %d %s", code, errOut)
	}

	// One bad row among good ones: exit 1 naming the line, nothing applied.
	bad := "path,device,address,type,byte_order,scan,scale,units,write_level,read_only,description\n" +
		"Line1/Level,sim,\"random(0,100)\",float64,,100ms,0.5:10,%,,true,tank level\n" +
		"Line1/Flow,simm,\"sine(-5,5,4s)\",float64,,100ms,,m3/h,,true,\n" +
		"Line1/Valve,sim,memory,bool,,100ms,,,supervise,false,\"main valve, DN50\"\n"
	csvFile := filepath.Join(dir, "tags.csv")
	os.WriteFile(csvFile, []byte(bad), 0o644)
	code, _, errOut := d.ctl(designer, "tags", "import", csvFile)
	if code != 1 || !strings.Contains(errOut, csvFile+`:3: tag "Line1/Flow": unknown device "simm"`) {
		t.Fatalf("bad CSV: exit %d, want 1 naming line 3:\n%s", code, errOut)
	}
	if got := d.read(designer, "Line1/Level", "Line1/Valve"); got["Line1/Level"].Quality != "Bad_NodeIdUnknown" || got["Line1/Valve"].Quality != "Bad_NodeIdUnknown" {
		t.Fatalf("a refused file was half-applied: %+v", got)
	}

	// The fixed file: the tags appear and read Good, qubiqd not restarted.
	pid := d.cmd.Process.Pid
	os.WriteFile(csvFile, []byte(strings.Replace(bad, "simm", "sim", 1)), 0o644)
	code, out, errOut := d.ctl(designer, "tags", "import", csvFile)
	if code != 0 || !strings.Contains(out, "Line1/Flow, Line1/Level, Line1/Valve") {
		t.Fatalf("fixed CSV: exit %d\n%s%s", code, out, errOut)
	}
	goodValues("Line1/Level", "Line1/Flow", "Line1/Valve", "Line1/Ramp")
	if d.cmd.Process.Pid != pid {
		t.Fatal("qubiqd restarted")
	}
	if got := d.read(designer, "Line1/Set"); got["Line1/Set"].Value.String() != "42.5" {
		t.Fatalf("the setpoint lost its value across the import: %+v", got)
	}
	if code, out, _ := d.ctl(designer, "tags", "list"); code != 0 || !strings.Contains(out, "Line1/Valve") || !strings.Contains(out, "supervise") {
		t.Fatalf("tags list:\n%s", out)
	}

	// Exports round-trip: importing them changes nothing.
	for _, name := range []string{"export.csv", "export.yaml"} {
		f := filepath.Join(dir, name)
		if code, _, errOut := d.ctl(designer, "tags", "export", "-o", f); code != 0 {
			t.Fatalf("tags export -o %s: %d %s", name, code, errOut)
		}
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "Line1/Valve") || !strings.Contains(string(b), "main valve, DN50") {
			t.Fatalf("%s:\n%s", name, b)
		}
		code, out, errOut := d.ctl(designer, "--json", "tags", "import", f)
		if code != 0 || !strings.Contains(out, `"added": []`) || !strings.Contains(out, `"changed": []`) || !strings.Contains(out, `"removed": []`) {
			t.Fatalf("re-import of %s changed something: exit %d\n%s%s", name, code, out, errOut)
		}
	}

	// project export, edit, project import: a tag removed, one added.
	pf := filepath.Join(dir, "plant.yaml")
	if code, _, errOut := d.ctl(designer, "project", "export", "-o", pf); code != 0 {
		t.Fatalf("project export: %d %s", code, errOut)
	}
	b, _ := os.ReadFile(pf)
	if !strings.HasPrefix(string(b), "# plant project") {
		t.Fatalf("exported project lost its comment:\n%s", b)
	}
	var edited []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "Line1/Level") {
			edited = append(edited, l)
		}
	}
	doc := strings.TrimRight(strings.Join(edited, "\n"), "\n") +
		"\n  - {path: Line2/Wave, device: sim, address: \"sine(-1,1,5s)\", type: float64, scan: 100ms}\n"
	os.WriteFile(pf, []byte(doc), 0o644)
	code, out, errOut = d.ctl(designer, "project", "import", pf)
	if code != 0 || !strings.Contains(out, "Line2/Wave") || !strings.Contains(out, "Line1/Level") {
		t.Fatalf("project import: exit %d\n%s%s", code, out, errOut)
	}
	goodValues("Line2/Wave", "Line1/Ramp")
	if got := d.read(designer, "Line1/Level"); got["Line1/Level"].Quality != "Bad_NodeIdUnknown" {
		t.Fatalf("removed tag reads %+v", got["Line1/Level"])
	}
	// A broken edit is refused, naming its line; the running project stays.
	os.WriteFile(pf, []byte(doc+"  - {path: Line2/Bad, device: sim, address: \"sine(-1,1,5s)\", type: float64, colour: red}\n"), 0o644)
	if code, _, errOut := d.ctl(designer, "project", "import", pf); code != 1 || !strings.Contains(errOut, pf+":") || !strings.Contains(errOut, `unknown key "colour"`) {
		t.Fatalf("broken project: exit %d\n%s", code, errOut)
	}
	goodValues("Line2/Wave")

	// A restart keeps the imported project (written to the project file).
	d.stop()
	d.start()
	goodValues("Line2/Wave", "Line1/Flow", "Line1/Valve")
	if code, out, _ := d.ctl(designer, "tags", "list"); code != 0 || strings.Contains(out, "Line1/Level") || strings.Contains(out, "Line2/Bad") {
		t.Fatalf("after restart, tags list:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(d.dir, "project.yaml")); string(b) != doc {
		t.Fatalf("project file after import:\n%s\nwant\n%s", b, doc)
	}
}

// TestProject_TagsImportBrowse_OPCUA: issue 6's browse against node-opcua.
// devices browse finds the Plc folder; tags import --browse makes a tag
// per variable under it (type auto, read-only where the node's AccessLevel
// has no CurrentWrite), imported without a restart, reading Good.
func TestProject_TagsImportBrowse_OPCUA(t *testing.T) {
	srv := peers.StartOPCUA(t)
	d := newDaemon(t, fmt.Sprintf(`devices:
  - {name: ua1, driver: opcua, url: %q, timeout: 2s, publishing_interval: 200ms, session_timeout: 20s,
     reconnect_min: 100ms, reconnect_max: 1s, application_uri: "urn:qubiq:it:client"}
  - {name: sim, driver: sim}
tags:
  - {path: Sim/Ramp, device: sim, address: "ramp(0,10,1s)", type: float64, scan: 100ms}
`, srv.URL()))
	d.start()
	designer := d.apiKey("designer", []string{"tag:read"}, "design", "designer")
	var out string
	waitFor(t, 15*time.Second, "devices browse ua1 lists the Plc folder", func() (bool, string) {
		code, o, e := d.ctl(designer, "devices", "browse", "ua1")
		out = o
		return code == 0 && strings.Contains(o, "nsu=urn:vendor:plc;s=Plc"), o + e
	})
	if code, _, errOut := d.ctl(designer, "devices", "browse", "sim"); code != 1 || !strings.Contains(errOut, "cannot browse") {
		t.Fatalf("browse of the simulator: exit %d %s", code, errOut)
	}
	code, out, errOut := d.ctl(designer, "tags", "import", "--browse", "ua1", "--root", "nsu=urn:vendor:plc;s=Plc",
		"--prefix", "UA/Plc", "--scan", "200ms")
	if code != 0 || !strings.Contains(out, "UA/Plc/Counter") || !strings.Contains(errOut, "tags from ua1") {
		t.Fatalf("tags import --browse: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 20*time.Second, "browsed tags Good", func() (bool, string) {
		got := d.read(designer, "UA/Plc/Int32", "UA/Plc/ReadOnly", "UA/Plc/Counter", "Sim/Ramp")
		for p, v := range got {
			if v.Quality != "Good" {
				return false, p + " " + v.Quality + " " + v.Reason
			}
		}
		return true, ""
	})
	var tags []struct {
		Path     string `json:"path"`
		Address  string `json:"address"`
		ReadOnly bool   `json:"read_only"`
	}
	if st, body := d.call("GET", "/api/v1/tags", designer, nil, &tags); st != 200 {
		t.Fatalf("GET /tags: %d %s", st, body)
	}
	ro := map[string]bool{}
	for _, tg := range tags {
		ro[tg.Path] = tg.ReadOnly
	}
	if !ro["UA/Plc/ReadOnly"] || ro["UA/Plc/Int32"] {
		t.Fatalf("read_only from AccessLevel: %v", ro)
	}
}
